"""A taxonomy of K named levels, leaf first: loading, consistency checks, relation codes, shuffle.

Names are unique within a level, not across levels: a NABirds Parent can also be a Supergroup, and that
is reported by the summary's depth checks rather than refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hierconsole.csv_input import read_csv_records
from hierconsole.errors import InputError
from hierconsole.levels import MAX_LEVELS, MIN_LEVELS, PAPER_CODES, Levels, default_level_names, level_codes
from hierconsole.plurals import counted, plural
from hierconsole.vocabulary import DEFAULT_LEVEL_NAMES

SHUFFLE_SEED = 20260818
"""The seed of the paper's semantic-alignment control (S9)."""


@dataclass(frozen=True, eq=False)
class Taxonomy:
    """A tree of K named levels, leaf first: `nodes[k]` are level k's names (a position is that name's
    index) and `parents[k][i]` is the level-(k+1) index of level k's node i."""

    nodes: tuple[tuple[str, ...], ...]
    parents: tuple[np.ndarray, ...]
    level_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        nodes = tuple(tuple(level) for level in self.nodes)
        object.__setattr__(self, "nodes", nodes)
        problems = []
        if not MIN_LEVELS <= len(nodes) <= MAX_LEVELS:
            raise InputError(
                "<taxonomy>", f"a taxonomy has {MIN_LEVELS} to {MAX_LEVELS} levels, got {len(nodes)}"
            )
        names = tuple(self.level_names) or default_level_names(len(nodes))
        object.__setattr__(self, "level_names", names)
        parents = []
        for edge in self.parents:
            arr = np.array(edge, dtype=np.int64).reshape(-1)
            arr.flags.writeable = False
            parents.append(arr)
        object.__setattr__(self, "parents", tuple(parents))
        if len(names) != len(nodes):
            problems.append(f"level_names needs {len(nodes)} names, got {names!r}")
        if repeated := repeated_level_names(names):
            problems.append(repeated)
        # Messages name the levels by their codes (leaf/middle/high for three levels, else from the names).
        codes = Levels.of(names).codes if len(names) == len(nodes) and not repeated else Levels.default(len(nodes)).codes
        for code, level in zip(codes, nodes, strict=True):
            if not level:
                problems.append(f"no {code} names")
            if len(set(level)) != len(level):
                problems.append(f"{code} names are not unique")
        if len(parents) != len(nodes) - 1 or any(p.shape != (len(nodes[k]),) for k, p in enumerate(parents)):
            problems.append(f"{' / '.join(_edge_names(codes))} lengths do not match the names")
        else:
            for k, p in enumerate(parents):
                if len(p) and (p.min() < 0 or p.max() >= len(nodes[k + 1])):
                    outside = plural(codes[k + 1]) if len(nodes) == 3 else f"{codes[k + 1]} names"
                    problems.append(f"{_edge_names(codes)[k]} holds an index outside the {outside}")
                    break
            else:
                for k, p in enumerate(parents):
                    if len(np.unique(p)) != len(nodes[k + 1]):
                        problems.append(
                            " and ".join(
                                f"every {codes[j + 1]} needs a {codes[j]}" for j in range(len(parents))
                            )
                        )
                        break
        if problems:
            raise InputError("<taxonomy>", problems)

    @classmethod
    def three(
        cls,
        leaves: Sequence[str],
        middles: Sequence[str],
        highs: Sequence[str],
        leaf_middle: Sequence[int] | np.ndarray,
        middle_high: Sequence[int] | np.ndarray,
        level_names: Sequence[str] = DEFAULT_LEVEL_NAMES,
    ) -> Taxonomy:
        """A three-level tree from its names and its two edges."""
        return cls(
            (tuple(leaves), tuple(middles), tuple(highs)),
            (np.asarray(leaf_middle), np.asarray(middle_high)),
            tuple(level_names),
        )

    @property
    def levels(self) -> Levels:
        return Levels.of(self.level_names)

    @property
    def k(self) -> int:
        """The number of levels."""
        return len(self.nodes)

    @property
    def leaves(self) -> tuple[str, ...]:
        return self.nodes[0]

    @property
    def n_leaves(self) -> int:
        return len(self.nodes[0])

    @property
    def counts(self) -> tuple[int, ...]:
        """Nodes per level, leaf first."""
        return tuple(len(level) for level in self.nodes)

    def leaf_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.leaves)}

    def ancestors(self) -> np.ndarray:
        """[n_leaves, K] int64: each leaf's ancestor index at every level (column 0 is the leaf itself)."""
        out = np.empty((self.n_leaves, self.k), dtype=np.int64)
        out[:, 0] = np.arange(self.n_leaves)
        for k, p in enumerate(self.parents):
            out[:, k + 1] = p[out[:, k]]
        return out

    def labels(self, leaf_idx: np.ndarray) -> np.ndarray:
        """[N, K] int64 label rows (leaf, its parent, ... its top) for leaf indices."""
        leaf = np.asarray(leaf_idx, dtype=np.int64).reshape(-1)
        columns = [leaf]
        for p in self.parents:
            columns.append(p[columns[-1]])
        return np.stack(columns, axis=1)

    def rows(self) -> list[tuple[str, ...]]:
        """One row of K names per leaf, leaf first, in leaf order."""
        anc = self.ancestors()
        return [tuple(self.nodes[k][i] for k, i in enumerate(row)) for row in anc.tolist()]

    def sha256(self) -> str:
        """Hash of the names in index order, the tree and the display names."""
        doc: dict[str, object]
        if self.k == 3:
            # The document of every three-level dataset stored before levels were general: its hash is
            # part of each study's dataset record, so it must not move.
            doc = {
                "level_names": list(self.level_names),
                "leaves": list(self.nodes[0]),
                "middles": list(self.nodes[1]),
                "highs": list(self.nodes[2]),
                "leaf_middle": self.parents[0].tolist(),
                "middle_high": self.parents[1].tolist(),
            }
        else:
            doc = {
                "level_names": list(self.level_names),
                "nodes": [list(level) for level in self.nodes],
                "parents": [p.tolist() for p in self.parents],
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
        """Build from rows of K names (leaf first); order of first appearance gives the indices.

        K is the number of level names, or without them the length of the first row. Every conflict is
        collected and raised at once as an InputError naming the rows. `row_numbers` gives the number to
        report for each row (a CSV's line numbers); by default rows count from 1.
        """
        row_tuples = [tuple(r) for r in rows]
        k = len(level_names) if level_names else (len(row_tuples[0]) if row_tuples else 3)
        if not MIN_LEVELS <= k <= MAX_LEVELS:
            raise InputError(
                source,
                f"{k} levels: a taxonomy has {MIN_LEVELS} to {MAX_LEVELS} levels, leaf first",
                hint="give one column per level, from the leaf up to the top",
            )
        names = tuple(level_names) if level_names else default_level_names(k)
        if repeated := repeated_level_names(names):
            raise InputError(source, repeated, hint="give each level a distinct name")
        numbers = list(row_numbers) if row_numbers is not None else list(range(1, len(row_tuples) + 1))
        problems: list[str] = []
        seen_rows: dict[tuple[str, ...], int] = {}
        parent_of: list[dict[str, dict[str, list[int]]]] = [{} for _ in range(k - 1)]
        for row, n in zip(row_tuples, numbers, strict=True):
            if len(row) != k:
                problems.append(f"row {n}: expected {k} names ({', '.join(names)}), got {len(row)}")
                continue
            empty = [names[i] for i, value in enumerate(row) if not str(value).strip()]
            if empty:
                problems.append(f"row {n}: empty {' and '.join(empty)} name")
                continue
            if row in seen_rows:
                problems.append(f"row {n}: duplicate of row {seen_rows[row]} ({', '.join(row)})")
                continue
            seen_rows[row] = n
            for j in range(k - 1):
                parent_of[j].setdefault(row[j], {}).setdefault(row[j + 1], []).append(n)
        for j in range(k - 1):
            problems += _conflicts(parent_of[j], names[j], names[j + 1])
        if not row_tuples:
            problems.append("no rows")
        if problems:
            needs = [f"each {names[0]} needs exactly one {names[1]}"]
            needs += [f"each {names[j]} exactly one {names[j + 1]}" for j in range(1, k - 1)]
            hint = ", ".join(needs[:-1]) + " and " + needs[-1] if len(needs) > 1 else needs[0]
            raise InputError(source, problems, hint=f"{hint}; list each {names[0]} once")
        nodes = [list(parent_of[0])]
        for j in range(k - 1):
            # A level's names in order of first appearance; without conflicts each child has one parent.
            nodes.append(list(dict.fromkeys(next(iter(p)) for p in parent_of[j].values())))
        index = [{name: i for i, name in enumerate(level)} for level in nodes]
        parents = [
            np.array([index[j + 1][next(iter(parent_of[j][x]))] for x in nodes[j]], dtype=np.int64)
            for j in range(k - 1)
        ]
        return cls(tuple(tuple(level) for level in nodes), tuple(parents), names)


def repeated_level_names(names: Sequence[str]) -> str | None:
    """The problem of level names that repeat ignoring case (a level reference ignores case, so `Genus`
    and `genus` would both mean the first), or None."""
    lowered = [str(n).strip().lower() for n in names]
    repeated = [n for n, low in zip(names, lowered, strict=True) if lowered.count(low) > 1]
    return f"level names repeat ignoring case: {', '.join(repeated)}" if repeated else None


def _edge_names(codes: Sequence[str]) -> list[str]:
    return [f"{codes[k]}_{codes[k + 1]}" for k in range(len(codes) - 1)]


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
    table = read_taxonomy_rows(path, level_names=level_names)
    return Taxonomy.from_rows(
        table.rows, level_names=table.level_names, source=path, row_numbers=table.numbers
    )


class TaxonomyRows(NamedTuple):
    """A taxonomy CSV's rows of K names (leaf first), each row's line number (the header is line 1) and
    the level names: those given, else the header's, or None for the three-level layout (the defaults)."""

    rows: list[tuple[str, ...]]
    numbers: list[int]
    level_names: tuple[str, ...] | None


def read_taxonomy_rows(path: str | Path, *, level_names: Sequence[str] | None = None) -> TaxonomyRows:
    """The rows of a taxonomy CSV, read once; which columns are levels is `_level_columns`' rule.

    Names are stripped, blank lines skipped. Rows are not checked here (a short row reads as empty
    names): `Taxonomy.from_rows` checks them.
    """
    path = Path(path)
    header, records = read_csv_records(path, "the taxonomy CSV")
    if header is None:
        raise InputError(
            path, "the file is empty", hint="the first line must be the header: the level names, leaf first"
        )
    where, names = _level_columns(path, header, level_names)
    rows, numbers = [], []
    for line, rec in records:
        if not any(cell.strip() for cell in rec):
            continue
        # A short row reads as empty names, which from_rows reports alongside every other conflict.
        rows.append(tuple(rec[i].strip() if i < len(rec) else "" for i in where))
        numbers.append(line)
    return TaxonomyRows(rows, numbers, names)


def _level_columns(
    path: Path, header: Sequence[str], level_names: Sequence[str] | None
) -> tuple[list[int], tuple[str, ...] | None]:
    """The header's level columns, leaf first, and the level names (see `TaxonomyRows`).

    With `level_names`, the header names each level by its code (`leaf,middle,high` for three levels) or
    its lowercase display name (e.g. `class,genus,family`); other columns are ignored. Without them, a
    header of `leaf`, `middle` and `high` (in any order) is the three-level layout; any other header names
    the levels itself, one column each, leaf first: `leaf,group` is two levels and `leaf,middle,high,top`
    four (ignoring a column there would drop a level silently).
    """
    cols = [h.strip().lower() for h in header]
    if level_names is None and sorted(cols) != sorted(PAPER_CODES):
        if not MIN_LEVELS <= len(cols) <= MAX_LEVELS or not all(cols):
            raise InputError(
                path,
                f"line 1: the header {','.join(header)!r} names {len([c for c in cols if c])} levels; "
                f"a taxonomy has {MIN_LEVELS} to {MAX_LEVELS}, each column named",
                hint="the first line names the levels, leaf first (e.g. species,genus,family)",
            )
        return list(range(len(cols))), tuple(h.strip() for h in header)
    names = tuple(level_names) if level_names else DEFAULT_LEVEL_NAMES
    codes = level_codes(names)
    where = []
    missing = []
    for code, display in zip(codes, names, strict=True):
        for key in (code, display.lower()):
            if key in cols:
                where.append(cols.index(key))
                break
        else:
            missing.append(code)
    if missing:
        raise InputError(
            path,
            f"line 1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(header is {','.join(header)!r})",
            hint=f"the first line must be the header {','.join(codes)}",
        )
    return where, tuple(level_names) if level_names else None


@dataclass(frozen=True)
class TaxonomySummary:
    """Counts per level, singleton groups and depth-sanity warnings of a taxonomy."""

    level_names: tuple[str, ...]
    counts: dict[str, int]
    """Nodes per level, by level code."""
    singletons: tuple[int, ...]
    """Per non-leaf level: its nodes holding a single child."""
    children: tuple[tuple[int, float, int], ...]
    """Per edge, fine to coarse: children per parent, min, median, max."""
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, tax: Taxonomy) -> TaxonomySummary:
        names, n = tax.level_names, tax.counts
        per_parent = [np.bincount(p, minlength=n[k + 1]) for k, p in enumerate(tax.parents)]
        warnings = []
        for k in reversed(range(tax.k - 1)):
            shared = sorted(set(tax.nodes[k]) & set(tax.nodes[k + 1]))
            if shared:
                warnings.append(
                    f"{counted(len(shared), names[k])} also used as {names[k + 1].lower()} names: "
                    f"{', '.join(map(repr, shared[:5]))}{' ...' if len(shared) > 5 else ''}"
                )
        for k in range(1, tax.k):
            if n[k] == n[k - 1]:
                child, parent = names[k - 1], names[k]
                warnings.append(
                    f"every {parent.lower()} holds one {child.lower()}: the {parent} level repeats the "
                    f"{child} level, so strict {parent} retrieval has no valid queries"
                )
        for k in range(1, tax.k):
            if n[k] == 1:
                warnings.append(f"a single {names[k].lower()}: the {names[k]} level carries no information")
        return cls(
            level_names=names,
            counts=dict(zip(tax.levels.codes, n, strict=True)),
            singletons=tuple(int((c == 1).sum()) for c in per_parent),
            children=tuple((int(c.min()), float(np.median(c)), int(c.max())) for c in per_parent),
            warnings=warnings,
        )

    def lines(self) -> list[str]:
        names = self.level_names
        counts = list(self.counts.values())
        lines = [", ".join(counted(c, name) for c, name in zip(counts, names, strict=True))]
        for k, single in enumerate(self.singletons, start=1):
            lines.append(f"{single} of {counted(counts[k], names[k])} hold one {names[k - 1].lower()}")
        for k, (lo, med, hi) in enumerate(self.children):
            lines.append(f"{plural(names[k])} per {names[k + 1].lower()}: min {lo}, median {med:g}, max {hi}")
        return lines + [f"warning: {w}" for w in self.warnings]


def relation_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[N, M] int8 pair relations between label rows a [N, K] and b [M, K] (paper Eq. 1, any depth).

    The index of the lowest level at which the two meet (0: same leaf, 1: same parent, other leaf, ...)
    and K where they share no ancestor. For three levels: REL_C, REL_M, REL_H, REL_O.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    k = a.shape[1]
    out = np.full((a.shape[0], b.shape[0]), k, dtype=np.int8)
    # Coarse to fine, so each finer match overwrites: the relations are exclusive by construction.
    for level in reversed(range(k)):
        out[a[:, level : level + 1] == b[None, :, level]] = level
    return out


@dataclass(frozen=True)
class DevelopmentShuffle:
    """The training taxonomy of the semantic-alignment control, with its evidence (paper S9).

    Only the development part of the tree moves: leaves with a development sample and, at every level
    above, the nodes that hold them. Test-only nodes keep their true parents, and evaluation (validation
    and test) always reads the true taxonomy; only the training labels come from `taxonomy`.
    """

    taxonomy: Taxonomy
    seed: int
    dev_nodes: tuple[np.ndarray, ...]
    """Per edge, fine to coarse: the child level's indices holding a development leaf, ascending (the
    first is the development leaves: those with at least one train or validation sample)."""
    fixed: tuple[int, ...]
    """Per edge: development nodes left under their true parent."""
    fixed_min: tuple[int, ...]
    """Per edge: the fewest fixed points the development group sizes allow (reached by construction)."""

    @property
    def sha256(self) -> str:
        return self.taxonomy.sha256()


def development_shuffle(
    tax: Taxonomy, dev_leaves: Iterable[int], seed: int = SHUFFLE_SEED
) -> DevelopmentShuffle:
    """Re-attach the development leaves among their parents, and at every level above the development
    nodes among theirs, keeping each group's size and leaving the fewest nodes under their true parent.

    The multiset of development children per parent is unchanged at every edge, so the supervision keeps
    its shape and loses only its meaning. A pure function of (taxonomy, leaves, seed); the edges draw
    from one generator, finest first. A whole-tree shuffle would also move test-only groups, whose
    labels no training run ever sees, and so reach a different fixed-point minimum.
    """
    leaves = np.unique(np.asarray(list(dev_leaves), dtype=np.int64))
    if len(leaves) == 0:
        raise ValueError("a development shuffle needs at least one development leaf")
    dev = [leaves]
    for p in tax.parents[:-1]:
        dev.append(np.unique(p[dev[-1]]))
    rng = np.random.default_rng(seed)
    parents = [p.copy() for p in tax.parents]
    for k, nodes in enumerate(dev):
        parents[k][nodes] = _deranged_permutation(tax.parents[k][nodes], rng)
    shuffled = Taxonomy(tax.nodes, tuple(parents), tax.level_names)
    return DevelopmentShuffle(
        taxonomy=shuffled,
        seed=seed,
        dev_nodes=tuple(dev),
        fixed=tuple(int((parents[k][n] == tax.parents[k][n]).sum()) for k, n in enumerate(dev)),
        fixed_min=tuple(min_fixed_points(tax.parents[k][n]) for k, n in enumerate(dev)),
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
