"""The three-level taxonomy leaf -> middle -> high: loading, consistency checks, relation codes, shuffle.

Names are unique within a level, not across levels: a NABirds Parent can also be a Supergroup, and that
is reported by the summary's depth checks rather than refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hierconsole.csv_input import read_csv_records
from hierconsole.errors import InputError
from hierconsole.plurals import counted, plural
from hierconsole.vocabulary import DEFAULT_LEVEL_NAMES, LEVELS, REL_C, REL_H, REL_M, REL_O

SHUFFLE_SEED = 20260818
"""The seed of the paper's semantic-alignment control (S9)."""


@dataclass(frozen=True, eq=False)
class Taxonomy:
    """A tree of leaves under middles under highs; a position in each tuple is that name's index."""

    leaves: tuple[str, ...]
    middles: tuple[str, ...]
    highs: tuple[str, ...]
    leaf_middle: np.ndarray
    middle_high: np.ndarray
    level_names: tuple[str, str, str] = DEFAULT_LEVEL_NAMES

    def __post_init__(self) -> None:
        object.__setattr__(self, "leaves", tuple(self.leaves))
        object.__setattr__(self, "middles", tuple(self.middles))
        object.__setattr__(self, "highs", tuple(self.highs))
        object.__setattr__(self, "level_names", tuple(self.level_names))
        lm = np.array(self.leaf_middle, dtype=np.int64).reshape(-1)
        mh = np.array(self.middle_high, dtype=np.int64).reshape(-1)
        lm.flags.writeable = False
        mh.flags.writeable = False
        object.__setattr__(self, "leaf_middle", lm)
        object.__setattr__(self, "middle_high", mh)
        problems = []
        if len(self.level_names) != 3:
            problems.append(f"level_names needs three names, got {self.level_names!r}")
        for level, names in zip(LEVELS, (self.leaves, self.middles, self.highs), strict=True):
            if not names:
                problems.append(f"no {level} names")
            if len(set(names)) != len(names):
                problems.append(f"{level} names are not unique")
        if lm.shape != (len(self.leaves),) or mh.shape != (len(self.middles),):
            problems.append("leaf_middle / middle_high lengths do not match the names")
        elif len(lm) and (lm.min() < 0 or lm.max() >= len(self.middles)):
            problems.append("leaf_middle holds an index outside the middles")
        elif len(mh) and (mh.min() < 0 or mh.max() >= len(self.highs)):
            problems.append("middle_high holds an index outside the highs")
        elif len(np.unique(lm)) != len(self.middles) or len(np.unique(mh)) != len(self.highs):
            problems.append("every middle needs a leaf and every high a middle")
        if problems:
            raise InputError("<taxonomy>", problems)

    @property
    def n_leaves(self) -> int:
        return len(self.leaves)

    @property
    def n_middles(self) -> int:
        return len(self.middles)

    @property
    def n_highs(self) -> int:
        return len(self.highs)

    def leaf_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.leaves)}

    def labels(self, leaf_idx: np.ndarray) -> np.ndarray:
        """[N, 3] int64 (leaf, middle, high) label rows for leaf indices."""
        leaf = np.asarray(leaf_idx, dtype=np.int64).reshape(-1)
        middle = self.leaf_middle[leaf]
        return np.stack([leaf, middle, self.middle_high[middle]], axis=1)

    def rows(self) -> list[tuple[str, str, str]]:
        return [
            (leaf, self.middles[m], self.highs[self.middle_high[m]])
            for leaf, m in zip(self.leaves, self.leaf_middle.tolist(), strict=True)
        ]

    def sha256(self) -> str:
        """Hash of the names in index order, the tree and the display names."""
        doc = {
            "level_names": list(self.level_names),
            "leaves": list(self.leaves),
            "middles": list(self.middles),
            "highs": list(self.highs),
            "leaf_middle": self.leaf_middle.tolist(),
            "middle_high": self.middle_high.tolist(),
        }
        return hashlib.sha256(json.dumps(doc, ensure_ascii=False).encode("utf-8")).hexdigest()

    def summary(self) -> TaxonomySummary:
        return TaxonomySummary.of(self)

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[Sequence[str]],
        *,
        level_names: Sequence[str] | None = None,
        source: str | Path = "<rows>",
        row_numbers: Sequence[int] | None = None,
    ) -> Taxonomy:
        """Build from (leaf, middle, high) name rows; order of first appearance gives the indices.

        Every conflict is collected and raised at once as an InputError naming the rows. `row_numbers`
        gives the number to report for each row (a CSV's line numbers); by default rows count from 1.
        """
        names = tuple(level_names or DEFAULT_LEVEL_NAMES)
        row_tuples = [tuple(r) for r in rows]
        numbers = list(row_numbers) if row_numbers is not None else list(range(1, len(row_tuples) + 1))
        problems: list[str] = []
        seen_rows: dict[tuple[str, ...], int] = {}
        leaf_to: dict[str, dict[str, list[int]]] = {}
        middle_to: dict[str, dict[str, list[int]]] = {}
        for row, n in zip(row_tuples, numbers, strict=True):
            if len(row) != 3:
                problems.append(f"row {n}: expected 3 names ({', '.join(names)}), got {len(row)}")
                continue
            empty = [names[i] for i, value in enumerate(row) if not str(value).strip()]
            if empty:
                problems.append(f"row {n}: empty {' and '.join(empty)} name")
                continue
            if row in seen_rows:
                problems.append(f"row {n}: duplicate of row {seen_rows[row]} ({', '.join(row)})")
                continue
            seen_rows[row] = n
            leaf, middle, high = row
            leaf_to.setdefault(leaf, {}).setdefault(middle, []).append(n)
            middle_to.setdefault(middle, {}).setdefault(high, []).append(n)
        problems += _conflicts(leaf_to, names[0], names[1])
        problems += _conflicts(middle_to, names[1], names[2])
        if not row_tuples:
            problems.append("no rows")
        if problems:
            raise InputError(
                source,
                problems,
                hint=f"each {names[0]} needs exactly one {names[1]} and each {names[1]} exactly one "
                f"{names[2]}; list each {names[0]} once",
            )
        leaves = list(leaf_to)
        middles = list(middle_to)
        highs = list(dict.fromkeys(next(iter(h)) for h in middle_to.values()))
        m_index = {m: i for i, m in enumerate(middles)}
        h_index = {h: i for i, h in enumerate(highs)}
        return cls(
            leaves=tuple(leaves),
            middles=tuple(middles),
            highs=tuple(highs),
            leaf_middle=np.array([m_index[next(iter(leaf_to[x]))] for x in leaves], dtype=np.int64),
            middle_high=np.array([h_index[next(iter(middle_to[m]))] for m in middles], dtype=np.int64),
            level_names=names,  # type: ignore[arg-type]
        )


def _conflicts(parent_of: dict[str, dict[str, list[int]]], child_level: str, parent_level: str) -> list[str]:
    out = []
    for child, parents in parent_of.items():
        if len(parents) > 1:
            where = "; ".join(
                f"{p!r} (row{'s' if len(r) > 1 else ''} {_join(r)})" for p, r in parents.items()
            )
            out.append(f"{child_level} {child!r} is under {len(parents)} {parent_level} values: {where}")
    return out


def _join(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers)


def load_taxonomy_csv(path: str | Path, *, level_names: Sequence[str] | None = None) -> Taxonomy:
    """Read and validate a taxonomy CSV (see `read_taxonomy_rows`); conflicts name CSV line numbers."""
    rows, numbers = read_taxonomy_rows(path, level_names=level_names)
    return Taxonomy.from_rows(rows, level_names=level_names, source=path, row_numbers=numbers)


def read_taxonomy_rows(
    path: str | Path, *, level_names: Sequence[str] | None = None
) -> tuple[list[tuple[str, str, str]], list[int]]:
    """(leaf, middle, high) rows of a CSV and each row's line number (the header is line 1).

    The header must name the columns `leaf,middle,high` or the lowercase display names (e.g.
    `class,genus,family`); extra columns are ignored, names are stripped, blank lines skipped. Rows are
    not checked here (a short row reads as empty names): `Taxonomy.from_rows` checks them.
    """
    path = Path(path)
    names = tuple(level_names or DEFAULT_LEVEL_NAMES)
    header, records = read_csv_records(path, "the taxonomy CSV")
    if header is None:
        raise InputError(path, "the file is empty", hint="the first line must be the header leaf,middle,high")
    cols = [h.strip().lower() for h in header]
    where = []
    missing = []
    for level, display in zip(LEVELS, names, strict=True):
        for key in (level, display.lower()):
            if key in cols:
                where.append(cols.index(key))
                break
        else:
            missing.append(level)
    if missing:
        raise InputError(
            path,
            f"line 1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(header is {','.join(header)!r})",
            hint="the first line must be the header leaf,middle,high",
        )
    rows, numbers = [], []
    for line, rec in records:
        if not any(cell.strip() for cell in rec):
            continue
        # A short row reads as empty names, which from_rows reports alongside every other conflict.
        cells = [rec[i].strip() if i < len(rec) else "" for i in where]
        rows.append((cells[0], cells[1], cells[2]))
        numbers.append(line)
    return rows, numbers


@dataclass(frozen=True)
class TaxonomySummary:
    """Counts per level, singleton groups and depth-sanity warnings of a taxonomy."""

    level_names: tuple[str, str, str]
    counts: dict[str, int]
    singleton_middles: int
    singleton_highs: int
    leaves_per_middle: tuple[int, float, int]  # min, median, max
    middles_per_high: tuple[int, float, int]
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, tax: Taxonomy) -> TaxonomySummary:
        per_middle = np.bincount(tax.leaf_middle, minlength=tax.n_middles)
        per_high = np.bincount(tax.middle_high, minlength=tax.n_highs)
        ln, mn, hn = tax.level_names
        warnings = []
        shared = sorted(set(tax.middles) & set(tax.highs))
        if shared:
            warnings.append(
                f"{counted(len(shared), mn)} also used as "
                f"{hn.lower()} names: {', '.join(map(repr, shared[:5]))}{' ...' if len(shared) > 5 else ''}"
            )
        shared = sorted(set(tax.leaves) & set(tax.middles))
        if shared:
            warnings.append(
                f"{counted(len(shared), ln)} also used as "
                f"{mn.lower()} names: {', '.join(map(repr, shared[:5]))}{' ...' if len(shared) > 5 else ''}"
            )
        if tax.n_middles == tax.n_leaves:
            warnings.append(
                f"every {mn.lower()} holds one {ln.lower()}: the {mn} level repeats the {ln} level, "
                f"so strict {mn} retrieval has no valid queries"
            )
        if tax.n_highs == tax.n_middles:
            warnings.append(
                f"every {hn.lower()} holds one {mn.lower()}: the {hn} level repeats the {mn} level, "
                f"so strict {hn} retrieval has no valid queries"
            )
        if tax.n_middles == 1:
            warnings.append(f"a single {mn.lower()}: the {mn} level carries no information")
        if tax.n_highs == 1:
            warnings.append(f"a single {hn.lower()}: the {hn} level carries no information")
        return cls(
            level_names=tax.level_names,
            counts={"leaf": tax.n_leaves, "middle": tax.n_middles, "high": tax.n_highs},
            singleton_middles=int((per_middle == 1).sum()),
            singleton_highs=int((per_high == 1).sum()),
            leaves_per_middle=(int(per_middle.min()), float(np.median(per_middle)), int(per_middle.max())),
            middles_per_high=(int(per_high.min()), float(np.median(per_high)), int(per_high.max())),
            warnings=warnings,
        )

    def lines(self) -> list[str]:
        ln, mn, hn = self.level_names
        c = self.counts

        lpm, mph = self.leaves_per_middle, self.middles_per_high
        return [
            f"{counted(c['leaf'], ln)}, {counted(c['middle'], mn)}, {counted(c['high'], hn)}",
            f"{self.singleton_middles} of {counted(c['middle'], mn)} hold one {ln.lower()}",
            f"{self.singleton_highs} of {counted(c['high'], hn)} hold one {mn.lower()}",
            f"{plural(ln)} per {mn.lower()}: min {lpm[0]}, median {lpm[1]:g}, max {lpm[2]}",
            f"{plural(mn)} per {hn.lower()}: min {mph[0]}, median {mph[1]:g}, max {mph[2]}",
        ] + [f"warning: {w}" for w in self.warnings]


def relation_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[N, M] int8 pair relations between label rows a [N, 3] and b [M, 3] (paper Eq. 1).

    REL_C: same leaf; REL_M: same middle, other leaf; REL_H: same high, other middle; REL_O: other high.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    out = np.full((a.shape[0], b.shape[0]), REL_O, dtype=np.int8)
    # Coarse to fine, so each finer match overwrites: the relations are exclusive by construction.
    out[a[:, 2:3] == b[None, :, 2]] = REL_H
    out[a[:, 1:2] == b[None, :, 1]] = REL_M
    out[a[:, 0:1] == b[None, :, 0]] = REL_C
    return out


@dataclass(frozen=True)
class DevelopmentShuffle:
    """The training taxonomy of the semantic-alignment control, with its evidence (paper S9).

    Only the development part of the tree moves: leaves with a development sample and the middles that
    hold them. Test-only leaves and middles keep their true parents, and evaluation (validation and
    test) always reads the true taxonomy; only the training labels come from `taxonomy`.
    """

    taxonomy: Taxonomy
    seed: int
    dev_leaves: np.ndarray
    """Leaf indices with at least one development (train + validation) sample, ascending."""
    dev_middles: np.ndarray
    """Middle indices holding a development leaf, ascending."""
    leaf_fixed: int
    """Development leaves left under their true middle."""
    middle_fixed: int
    """Development middles left under their true high."""
    leaf_min: int
    middle_min: int
    """The fewest fixed points the development group sizes allow (reached by construction)."""

    @property
    def sha256(self) -> str:
        return self.taxonomy.sha256()


def development_shuffle(tax: Taxonomy, dev_leaves: Iterable[int], seed: int = SHUFFLE_SEED) -> DevelopmentShuffle:
    """Re-attach the development leaves among the development middles, and those middles among their
    highs, keeping each group's size and leaving the fewest items under their true parent.

    The multiset of development leaves per middle and of development middles per high is unchanged, so
    the supervision keeps its shape and loses only its meaning. A pure function of (taxonomy, leaves,
    seed). A whole-tree shuffle would also move test-only groups, whose
    labels no training run ever sees, and so reach a different fixed-point minimum.
    """
    leaves = np.unique(np.asarray(list(dev_leaves), dtype=np.int64))
    if len(leaves) == 0:
        raise ValueError("a development shuffle needs at least one development leaf")
    middles = np.unique(tax.leaf_middle[leaves])
    rng = np.random.default_rng(seed)
    leaf_middle = tax.leaf_middle.copy()
    middle_high = tax.middle_high.copy()
    leaf_middle[leaves] = _deranged_permutation(tax.leaf_middle[leaves], rng)
    middle_high[middles] = _deranged_permutation(tax.middle_high[middles], rng)
    shuffled = Taxonomy(
        leaves=tax.leaves,
        middles=tax.middles,
        highs=tax.highs,
        leaf_middle=leaf_middle,
        middle_high=middle_high,
        level_names=tax.level_names,
    )
    return DevelopmentShuffle(
        taxonomy=shuffled,
        seed=seed,
        dev_leaves=leaves,
        dev_middles=middles,
        leaf_fixed=int((leaf_middle[leaves] == tax.leaf_middle[leaves]).sum()),
        middle_fixed=int((middle_high[middles] == tax.middle_high[middles]).sum()),
        leaf_min=min_fixed_points(tax.leaf_middle[leaves]),
        middle_min=min_fixed_points(tax.middle_high[middles]),
    )


def min_fixed_points(groups: np.ndarray) -> int:
    """Fewest items any size-preserving reassignment must leave in their own group."""
    sizes = np.bincount(groups)
    return max(0, 2 * int(sizes.max()) - len(groups))


def _deranged_permutation(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random permutation of `groups` with as few positions keeping their value as possible.

    A fixed item swaps with a random item such that both end outside their own group; when no such
    partner exists, every other group's items already sit in this group, so the remaining fixed points
    are the unavoidable minimum.
    """
    new = rng.permutation(groups)
    fixed = np.flatnonzero(new == groups)
    rng.shuffle(fixed)
    for i in fixed.tolist():
        g = groups[i]
        if new[i] != g:
            continue  # an earlier swap already moved it
        partners = np.flatnonzero((new != g) & (groups != g))
        if len(partners) == 0:
            continue
        j = int(rng.choice(partners))
        new[i], new[j] = new[j], new[i]
    return new
