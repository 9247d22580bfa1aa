"""A taxonomy's levels, leaf first: their codes (stored, in JSON keys and column names) and display names.

A tree has K levels, 2 <= K <= 12. Three-level data keeps the codes `leaf, middle, high` whatever its
display names are (CUB's Class/Genus/Family, NABirds' Leaf/Parent/Supergroup), so every store, export
and JSON key written before levels were general stays valid. Any other depth takes its codes from its
display names (iNaturalist's `species, genus, family, ...`), or `l1 .. lK` when those do not make
distinct codes or make only paper codes (so level columns named only leaf/middle/high are always a
three-level table's).

Standard library only: the front ends, the workers and the store all read it at no start-up cost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MIN_LEVELS = 2
MAX_LEVELS = 12

PAPER_CODES: tuple[str, str, str] = ("leaf", "middle", "high")
"""The codes of every three-level taxonomy (the paper's), finest first."""

WHOLE_TREE = "hierarchy"
"""The level under which the metrics that read the whole tree (H-AP, ASI, NDCG@k, mistake severity@k,
CPCC: `hierconsole.metrics`) are stored and reported beside the levels."""
RESERVED_CODES = frozenset({"hier", WHOLE_TREE})
"""Codes a level cannot take: `hier` is the hier score's row beside the levels, `hierarchy` the whole
tree's."""


def column_of(level: str, metric: str) -> str:
    """The per-seed column of a (level, metric): ``{level}_{metric}``, or the metric's own name for the
    whole tree's metrics (``H-AP``, ``NDCG@10``, ...), which belong to no level."""
    return metric if level == WHOLE_TREE else f"{level}_{metric}"


_CODE = re.compile(r"[a-z][a-z0-9]*")


class LevelError(ValueError):
    """A level reference or a level list that does not fit the taxonomy (the message says which)."""


def default_level_names(k: int) -> tuple[str, ...]:
    """Display names for K levels when the data names none: the paper's for three, else Level 1 .. K."""
    _check_depth(k)
    if k == 3:
        return ("Leaf", "Middle", "High")
    return tuple(f"Level {i}" for i in range(1, k + 1))


def level_codes(names: Sequence[str]) -> tuple[str, ...]:
    """The codes of levels with these display names (see the module docstring).

    A code is lowercase letters and digits, starting with a letter, with no `_`: column names are
    `{code}_{metric}` and are split at their last `_`.
    """
    k = len(names)
    _check_depth(k)
    if k == 3:
        return PAPER_CODES
    slugs = tuple(re.sub(r"[^a-z0-9]", "", name.lower()) for name in names)
    distinct = all(_CODE.fullmatch(s) for s in slugs) and len(set(slugs)) == k
    # Codes drawn only from leaf/middle/high belong to three-level data: a table whose level columns are
    # all paper codes is then a three-level table (one missing a level without valid queries), never a
    # shallower tree (e.g. two levels named Leaf and Middle).
    if distinct and not RESERVED_CODES & set(slugs) and not set(slugs) <= set(PAPER_CODES):
        return slugs
    return tuple(f"l{i}" for i in range(1, k + 1))


def _check_depth(k: int) -> None:
    if not MIN_LEVELS <= k <= MAX_LEVELS:
        raise LevelError(f"a taxonomy has {MIN_LEVELS} to {MAX_LEVELS} levels, got {k}")


@dataclass(frozen=True)
class Levels:
    """K levels, leaf (index 0) to top (index K-1): `codes[i]` is stored, `names[i]` is shown."""

    codes: tuple[str, ...]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "codes", tuple(self.codes))
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))
        _check_depth(len(self.codes))
        if len(self.names) != len(self.codes):
            raise LevelError(f"{len(self.codes)} level codes but {len(self.names)} names")
        if len(set(self.codes)) != len(self.codes):
            raise LevelError(f"level codes repeat: {', '.join(self.codes)}")

    @classmethod
    def of(cls, names: Sequence[str]) -> Levels:
        """The levels of a taxonomy with these display names, leaf first."""
        return cls(level_codes(names), tuple(names))

    @classmethod
    def default(cls, k: int) -> Levels:
        return cls.of(default_level_names(k))

    @property
    def k(self) -> int:
        return len(self.codes)

    @property
    def leaf(self) -> str:
        return self.codes[0]

    @property
    def top(self) -> str:
        return self.codes[-1]

    @property
    def non_leaf(self) -> tuple[str, ...]:
        return self.codes[1:]

    @property
    def is_paper(self) -> bool:
        """True for three levels: the codes and JSON keys written before levels were general."""
        return self.codes == PAPER_CODES

    def index(self, ref: str | int) -> int:
        """0-based position of a level given by code, display name (any case) or 1-based number."""
        if isinstance(ref, int) and not isinstance(ref, bool):
            if 1 <= ref <= self.k:
                return ref - 1
        else:
            text = str(ref).strip()
            if text in self.codes:
                return self.codes.index(text)
            lowered = [n.lower() for n in self.names]
            if text.lower() in lowered:
                return lowered.index(text.lower())
            if text.isdigit() and 1 <= int(text) <= self.k:
                return int(text) - 1
        raise LevelError(f"no level {ref!r}: the levels are {self.describe()}")

    def resolve(self, ref: str | int) -> str:
        """The code of a level given by code, display name or 1-based number."""
        return self.codes[self.index(ref)]

    def name(self, code: str) -> str:
        """The display name of a level code."""
        return self.names[self.index(code)]

    def describe(self) -> str:
        """`1 species, 2 genus, ...` (number, code, and the display name where it differs)."""
        parts = []
        for i, (code, name) in enumerate(zip(self.codes, self.names, strict=True), start=1):
            parts.append(f"{i} {code}" + (f" ({name})" if name.lower() != code else ""))
        return ", ".join(parts)

    def edge_key(self, k: int) -> str:
        """The name of the edge from level k to level k+1 (0-based): `leaf_middle`, `middle_high`, ..."""
        if not 0 <= k < self.k - 1:
            raise LevelError(f"no edge above level {k + 1} of {self.k}")
        return f"{self.codes[k]}_{self.codes[k + 1]}"

    @property
    def edges(self) -> tuple[str, ...]:
        return tuple(self.edge_key(k) for k in range(self.k - 1))


PAPER_LEVELS = Levels(PAPER_CODES, ("Leaf", "Middle", "High"))
"""Three levels with the default display names."""


def default_hier(levels: Levels) -> tuple[str, ...]:
    """The levels the hier score averages unless a study declares others: every level but the leaf."""
    return levels.non_leaf


def default_regression_targets(k: int) -> tuple[float, ...]:
    """Scaled tree-distance targets of the K+1 pair relations (same leaf ... same top, other).

    Evenly spaced from 0.2 (same leaf) to 0.8 (same top), then 1.0 for pairs with no common ancestor;
    for three levels exactly the paper's (0.2, 0.5, 0.8, 1.0) in float64.
    """
    _check_depth(k)
    return tuple(0.2 + 0.6 * i / (k - 1) for i in range(k)) + (1.0,)


@dataclass(frozen=True)
class LevelPlan:
    """Which levels a study trains on and which the hier score averages (codes, leaf first)."""

    levels: Levels
    hier: tuple[str, ...]
    trained: tuple[str, ...]

    def __post_init__(self) -> None:
        problem = self.hier_problem(self.levels, self.hier) or self.trained_problem(self.levels, self.trained)
        if problem:
            raise LevelError(problem)

    @staticmethod
    def hier_problem(levels: Levels, hier: Sequence[str]) -> str | None:
        """Why these levels cannot be the hier score's, or None."""
        unknown = [c for c in hier if c not in levels.codes]
        if unknown:
            return f"hier levels {', '.join(unknown)} are not in {levels.describe()}"
        if not hier:
            return "the hier score needs at least one level"
        if levels.leaf in hier:
            return f"the hier score never counts the leaf level ({levels.leaf})"
        return None

    @staticmethod
    def trained_problem(levels: Levels, trained: Sequence[str]) -> str | None:
        """Why a study cannot train on these levels, or None."""
        unknown = [c for c in trained if c not in levels.codes]
        if unknown:
            return f"trained levels {', '.join(unknown)} are not in {levels.describe()}"
        if trained and trained[0] != levels.leaf:
            return f"training needs the leaf level ({levels.leaf}) first"
        if len(trained) < MIN_LEVELS:
            # One level has no hierarchy to learn: its only relations are "same leaf" and "other".
            return f"training needs the leaf and at least one level above it ({levels.describe()})"
        if tuple(trained) != levels.codes[: len(trained)]:
            # Training sees only the kept label columns, so with a level skipped its strict positives at
            # the level above the gap would not be evaluation's (which reads every level).
            return (
                f"training needs a run of levels from the leaf up, in order with none skipped "
                f"({', '.join(levels.codes[: len(trained)])}), got {', '.join(trained)}"
            )
        return None

    @classmethod
    def default(cls, levels: Levels) -> LevelPlan:
        return cls(levels, default_hier(levels), levels.codes)

    @property
    def trained_index(self) -> tuple[int, ...]:
        """Label columns of the trained levels."""
        return tuple(self.levels.codes.index(c) for c in self.trained)
