"""Splits as sorted row-index arrays with a SHA256 identifier: official, hierarchy-disjoint, tuning, Q/G.

Every generator is a pure function of its arguments (labels, indices, seed); the parts of a split are
pairwise disjoint. Randomness comes from numpy's PCG64 `default_rng(seed)`, which is the same on every
platform, so a seed reproduces the same indices and hash anywhere.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hierconsole.config.preset import DEFAULT_SEEDS, DEFAULT_SPLIT_FRACTIONS
from hierconsole.errors import ConfigError
from hierconsole.levels import PAPER_CODES, LevelError, Levels

if TYPE_CHECKING:
    from hierconsole.datasets.featureset import FeatureSet

DEFAULT_QG_SEEDS = DEFAULT_SEEDS
"""The protocol's Q/G perturbation seeds: the presets' default (one definition, in config.preset)."""
PARTS = {
    "official": ("train", "val", "test"),
    "hierarchy_disjoint": ("train", "val", "test"),
    "tuning": ("fit", "query", "gallery"),
    "qg": ("query", "gallery"),
}


@dataclass(frozen=True, eq=False)
class Split:
    kind: str
    parts: dict[str, np.ndarray]
    params: dict

    def __post_init__(self) -> None:
        if self.kind not in PARTS:
            raise ValueError(f"unknown split kind {self.kind!r}")
        parts = {}
        for name, idx in self.parts.items():
            arr = np.unique(np.asarray(idx, dtype=np.int64))
            if len(arr) != len(idx):
                raise ValueError(f"split part {name!r} repeats indices")
            arr.flags.writeable = False
            parts[name] = arr
        names = sorted(parts)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if np.intersect1d(parts[a], parts[b]).size:
                    raise ValueError(f"split parts {a!r} and {b!r} overlap")
        object.__setattr__(self, "parts", parts)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.parts[name]

    def sizes(self) -> dict[str, int]:
        return {name: len(idx) for name, idx in self.parts.items()}

    def sha256(self) -> str:
        """Over the kind, then each part in name order: name, count and int64 little-endian indices."""
        h = hashlib.sha256(self.kind.encode("utf-8"))
        for name in sorted(self.parts):
            idx = self.parts[name]
            h.update(b"\x00" + name.encode("utf-8") + b"\x00")
            h.update(np.int64(len(idx)).astype("<i8").tobytes())
            h.update(idx.astype("<i8", copy=False).tobytes())
        return h.hexdigest()


def index_sha256(indices: np.ndarray) -> str:
    """SHA256 of a set of sample indices (sorted, unique, int64 little-endian): the record of which samples
    a fitted baseline saw, recomputable by an audit from the split file alone."""
    idx = np.unique(np.asarray(indices, dtype=np.int64))
    return hashlib.sha256(idx.astype("<i8", copy=False).tobytes()).hexdigest()


def official_split(fs: FeatureSet) -> Split:
    """The dataset's own split: train and test, plus val when any sample is marked val."""
    from hierconsole.datasets.featureset import SPLIT_NAMES

    parts = {name: np.flatnonzero(fs.split == code) for code, name in enumerate(SPLIT_NAMES)}
    if not len(parts["val"]):
        del parts["val"]
    params = {"dataset": fs.name, "n_rows": len(fs), **_group_counts(fs.labels, parts, fs.taxonomy.levels)}
    return Split("official", parts, params)


def _largest_remainder(total: int, fractions: Sequence[float]) -> list[int]:
    """Integer counts summing to `total`, proportional to `fractions`, each positive fraction >= 1."""
    f = np.asarray(fractions, dtype=np.float64)
    raw = f / f.sum() * total
    counts = np.floor(raw).astype(np.int64)
    for i in np.argsort(-(raw - counts), kind="stable")[: total - counts.sum()]:
        counts[i] += 1
    for i in np.flatnonzero((f > 0) & (counts == 0)):
        donor = int(np.argmax(counts))
        if counts[donor] > 1:
            counts[donor] -= 1
            counts[i] += 1
    return counts.tolist()


TARGET_STEPS = 20_000
"""Swap rounds the targeted assignment may take before it says the targets cannot be met."""
OFFICIAL_TEST = 2
"""The official split code of a test image (featureset.SPLIT_NAMES)."""


def _levels_of(labels: np.ndarray, levels: Levels | None) -> Levels:
    """The levels of [N, K] label rows: those given (their K must match); three-level rows may leave
    them out (leaf/middle/high)."""
    k = int(labels.shape[1]) if labels.ndim == 2 else 0
    if levels is None:
        if k != 3:
            # Default codes (level1 ...) would not be the dataset's: counts keyed by them read as empty.
            raise ValueError(f"labels of {k} levels need the dataset's levels (taxonomy.levels) passed as levels=")
        return Levels.default(k)
    if levels.k != k:
        raise ConfigError(f"labels have {k} levels but {levels.k} are named ({levels.describe()})")
    return levels


def split_level_index(levels: Levels, level: str | int) -> int:
    """The label column a hierarchy-disjoint split groups by, from a level's code, display name or
    1-based number (a level above the leaf, or the leaf for a leaf-disjoint split). On a tree that is not
    three-level the paper's `middle` (the preset default) means level 2 and `high` the top level."""
    if not levels.is_paper and isinstance(level, str) and level not in levels.codes:
        legacy = {"middle": 1, "high": levels.k - 1}
        if level in legacy and level.lower() not in (n.lower() for n in levels.names):
            return legacy[level]
    try:
        return levels.index(level)
    except LevelError:
        raise ConfigError(
            f"level must be one of {levels.describe()} (a code, name or number), got {level!r}"
        ) from None


def hierarchy_disjoint_split(
    labels: np.ndarray,
    *,
    level: str | int = "middle",
    levels: Levels | None = None,
    counts: Sequence[int] | None = None,
    fractions: Sequence[float] | None = None,
    seed: int,
    within: np.ndarray | None = None,
    official: np.ndarray | None = None,
    leaf_counts: Sequence[int] | None = None,
    image_counts: Sequence[int] | None = None,
) -> Split:
    """Assign whole groups of `level` to train/val/test, so the parts share no group at that level nor
    any finer one (a middle-disjoint split is also leaf-disjoint, e.g. NABirds Parent-disjoint).

    `level` is a code, display name or 1-based number of `levels` (the labels' levels; default the
    default codes of their depth), see `split_level_index`; the split records its code.

    `counts` gives groups per part (train, val, test) and must add up to the number of groups; otherwise
    `fractions` (default DEFAULT_SPLIT_FRACTIONS) is rounded by largest remainder. Groups are drawn by a seeded
    permutation. `within` restricts the split to those rows (default all).

    `official` (the rows' official split codes) keeps the dataset's own image split inside the group
    split: train and val take only their groups' official train/val images and test only its groups'
    official test images, the rest are left out (the NABirds bundle of 19,021 + 5,017 images, not all
    48,562). `leaf_counts` and `image_counts` (per part) are targets: after the seeded draw, seeded swaps
    of whole groups between parts, which keep the group counts, run until both are met exactly.
    """
    labels = np.asarray(labels, dtype=np.int64)
    levels = _levels_of(labels, levels)
    col = split_level_index(levels, level)
    level = levels.codes[col]
    if counts is not None and fractions is not None:
        raise ConfigError("give counts or fractions, not both")
    rows = np.arange(len(labels)) if within is None else np.unique(np.asarray(within, dtype=np.int64))
    groups = np.unique(labels[rows, col])
    if counts is None:
        fr = tuple(fractions) if fractions is not None else DEFAULT_SPLIT_FRACTIONS
        if len(fr) != 3 or min(fr) < 0 or sum(fr) <= 0:
            raise ConfigError(f"fractions must be three non-negative numbers, got {fr!r}")
        counts = _largest_remainder(len(groups), fr)
    counts = [int(c) for c in counts]
    if len(counts) != 3 or min(counts) < 0 or sum(counts) != len(groups):
        raise ConfigError(
            f"counts {counts} must be three non-negative numbers adding up to the {len(groups)} {level} groups"
        )
    rng = np.random.default_rng(seed)
    drawn = rng.permutation(groups)
    bounds = np.cumsum([0, *counts])
    part_of = np.empty(int(groups.max()) + 1 if len(groups) else 0, dtype=np.int64)
    for p in range(3):
        part_of[drawn[bounds[p] : bounds[p + 1]]] = p
    # in_part[p]: whether a row may belong to part p once its group is there.
    if official is None:
        in_part = np.ones((3, len(rows)), dtype=bool)
    else:
        is_test = np.asarray(official)[rows] == OFFICIAL_TEST
        in_part = np.stack([~is_test, ~is_test, is_test])
    if leaf_counts is not None or image_counts is not None:
        _meet_targets(labels[rows], col, groups, part_of, in_part, leaf_counts, image_counts, rng, level)
    where = part_of[labels[rows, col]]
    parts = {
        name: rows[(where == p) & in_part[p]] for p, name in enumerate(("train", "val", "test"))
    }
    return Split(
        "hierarchy_disjoint",
        parts,
        {
            "level": level,
            "counts": counts,
            "seed": int(seed),
            "n_rows": len(rows),
            "images": "all" if official is None else "official",
            "leaf_counts": None if leaf_counts is None else [int(c) for c in leaf_counts],
            "image_counts": None if image_counts is None else [int(c) for c in image_counts],
            **_group_counts(labels, parts, levels),
        },
    )


def _meet_targets(
    labels: np.ndarray,
    col: int,
    groups: np.ndarray,
    part_of: np.ndarray,
    in_part: np.ndarray,
    leaf_counts: Sequence[int] | None,
    image_counts: Sequence[int] | None,
    rng: np.random.Generator,
    level: str,
) -> None:
    """Swap groups between parts (in place on `part_of`) until the parts hold exactly `leaf_counts`
    leaves and `image_counts` images; raise ConfigError with the closest assignment found otherwise.

    Each round takes a random pair of parts and a random group of the first, and swaps it with the group
    of the second that leaves the smallest total error (ties drawn at random); a swap that does not
    raise the error is kept, so the walk crosses plateaus. Everything is drawn from the split's own
    generator, so the result is a pure function of the seed.
    """
    g_index = np.searchsorted(groups, labels[:, col])
    n_groups = len(groups)
    # Distinct leaves of each group (a leaf lies in one group of every coarser level).
    leaf_group = np.unique(np.stack([labels[:, 0], g_index], axis=1), axis=0)[:, 1]
    n_leaf = np.bincount(leaf_group, minlength=n_groups)
    n_img = np.stack([np.bincount(g_index[in_part[p]], minlength=n_groups) for p in range(3)])
    targets = []
    if leaf_counts is not None:
        targets.append((np.asarray(leaf_counts, dtype=np.int64), np.stack([n_leaf] * 3)))
    if image_counts is not None:
        targets.append((np.asarray(image_counts, dtype=np.int64), n_img))
    assign = part_of[groups]

    def totals(assign: np.ndarray) -> list[np.ndarray]:
        return [np.array([per[p][assign == p].sum() for p in range(3)]) for _, per in targets]

    def error(tot: list[np.ndarray]) -> int:
        return int(sum(np.abs(t - want).sum() for t, (want, _) in zip(tot, targets, strict=True)))

    tot = totals(assign)
    cost = error(tot)
    best_cost, best_assign = cost, assign.copy()
    pairs = [(0, 1), (0, 2), (1, 2)]
    for step in range(TARGET_STEPS):
        if cost == 0:
            break
        p, q = pairs[int(rng.integers(3))]
        in_p, in_q = np.flatnonzero(assign == p), np.flatnonzero(assign == q)
        if not len(in_p) or not len(in_q):
            continue
        g = int(in_p[rng.integers(len(in_p))])
        new_cost = np.zeros(len(in_q), dtype=np.int64)
        for t, (want, per) in zip(tot, targets, strict=True):
            dp = per[p][in_q] - per[p][g]  # part p loses g, gains h
            dq = per[q][g] - per[q][in_q]
            r = 3 - p - q
            new_cost += np.abs(t[p] + dp - want[p]) + np.abs(t[q] + dq - want[q]) + abs(int(t[r] - want[r]))
        best = np.flatnonzero(new_cost == new_cost.min())
        h = int(in_q[best[rng.integers(len(best))]])
        rise = int(new_cost.min()) - cost
        # A rise is taken now and then (less often as the rounds run out) to leave a local minimum.
        heat = 2.0 * (1 - step / TARGET_STEPS) + 1e-3
        if rise <= 0 or rng.random() < math.exp(-rise / heat):
            assign[g], assign[h] = q, p
            tot = totals(assign)
            cost = error(tot)
            if cost < best_cost:
                best_cost, best_assign = cost, assign.copy()
    assign, tot = best_assign, totals(best_assign)
    cost = best_cost
    if cost:
        reached = "; ".join(
            f"{what} {t.tolist()} for {want.tolist()}"
            for (want, _), t, what in zip(
                targets, tot, [w for w, c in (("leaves", leaf_counts), ("images", image_counts)) if c is not None],
                strict=True,
            )
        )
        raise ConfigError(
            f"no assignment of the {n_groups} {level} groups meets the split targets (closest: {reached}); "
            "set split.leaf_counts / split.image_counts to counts this dataset allows, or clear them "
            "(--set split.leaf_counts=none --set split.image_counts=none)"
        )
    part_of[groups] = assign


def _group_counts(
    labels: np.ndarray, parts: dict[str, np.ndarray], levels: Levels | None = None
) -> dict[str, dict[str, int]]:
    """Groups per part at every level, as `{code}_groups` (leaf first)."""
    codes = _levels_of(labels, levels).codes
    return {
        f"{code}_groups": {name: len(np.unique(labels[idx, i])) for name, idx in parts.items()}
        for i, code in enumerate(codes)
    }


HOLDOUT_FRACTION = 0.2
"""Share of each leaf's train samples held out for validation when the dataset has no validation part."""


def tuning_split(
    labels: np.ndarray,
    train_idx: np.ndarray,
    val_idx: np.ndarray | None = None,
    *,
    query_fraction: float = 0.2,
    holdout_fraction: float = HOLDOUT_FRACTION,
    seed: int = 0,
    n_query: int | None = None,
    levels: Levels | None = None,
) -> Split:
    """Training-internal query/gallery validation for temperature tuning (official test never touched).

    With `val_idx` (e.g. a hierarchy-disjoint val part): fit = train_idx, and val is split into query and
    gallery. Without it: a seeded, leaf-stratified `holdout_fraction` of train_idx becomes the validation
    pool (each leaf keeps at least one fitting sample; leaves with one sample stay whole in fit), fit is
    the rest, and the pool is split into query and gallery. The query part is a seeded uniform draw of
    round(query_fraction * pool) rows, or exactly `n_query` rows when given (NABirds: 1,013 of 5,062,
    which no fraction rounds to).
    """
    if not 0 < query_fraction < 1 or not 0 < holdout_fraction < 1:
        raise ConfigError("query_fraction and holdout_fraction must lie strictly between 0 and 1")
    labels = np.asarray(labels, dtype=np.int64)
    train_idx = np.unique(np.asarray(train_idx, dtype=np.int64))
    rng = np.random.default_rng(seed)
    if val_idx is not None:
        fit, pool, mode = train_idx, np.unique(np.asarray(val_idx, dtype=np.int64)), "given_val"
    else:
        shuffled = rng.permutation(train_idx)
        leaf = labels[shuffled, 0]
        order = np.argsort(leaf, kind="stable")
        shuffled, leaf = shuffled[order], leaf[order]
        starts = np.flatnonzero(np.r_[True, leaf[1:] != leaf[:-1]])
        sizes = np.diff(np.r_[starts, len(leaf)])
        take = np.minimum(np.rint(sizes * holdout_fraction).astype(np.int64), sizes - 1)
        rank = np.arange(len(leaf)) - np.repeat(starts, sizes)
        held = rank < np.repeat(take, sizes)
        fit, pool, mode = shuffled[~held], shuffled[held], "holdout"
    if n_query is None:
        n_query = int(round(query_fraction * len(pool)))
    if n_query < 1 or n_query >= len(pool):
        raise ConfigError(
            f"the validation pool of {len(pool)} rows is too small to split into query and gallery"
        )
    drawn = rng.permutation(pool)
    query, gallery = drawn[:n_query], drawn[n_query:]
    return Split(
        "tuning",
        {"fit": fit, "query": query, "gallery": gallery},
        {
            "mode": mode,
            "seed": int(seed),
            "query_fraction": query_fraction,
            "n_query": int(n_query),
            "holdout_fraction": holdout_fraction if mode == "holdout" else None,
            "strict_valid": strict_valid_counts(labels, query, gallery, levels),
        },
    )


def qg_perturbation(
    labels: np.ndarray, test_idx: np.ndarray, *, n_query: int, seed: int, levels: Levels | None = None
) -> Split:
    """One query/gallery perturbation of the test rows: a seeded uniform draw of n_query queries, the rest
    gallery (e.g. 870 of 5,794 for CUB, 1,003 of 5,017 for NABirds)."""
    test_idx = np.unique(np.asarray(test_idx, dtype=np.int64))
    if not 0 < n_query < len(test_idx):
        raise ConfigError(f"n_query must lie between 1 and {len(test_idx) - 1}, got {n_query}")
    drawn = np.random.default_rng(seed).permutation(test_idx)
    query, gallery = drawn[:n_query], drawn[n_query:]
    return Split(
        "qg",
        {"query": query, "gallery": gallery},
        {
            "seed": int(seed),
            "n_query": int(n_query),
            "n_test": len(test_idx),
            "strict_valid": strict_valid_counts(labels, query, gallery, levels),
        },
    )


def qg_perturbations(
    labels: np.ndarray,
    test_idx: np.ndarray,
    *,
    n_query: int,
    seeds: Sequence[int] = DEFAULT_QG_SEEDS,
    levels: Levels | None = None,
) -> list[Split]:
    return [qg_perturbation(labels, test_idx, n_query=n_query, seed=s, levels=levels) for s in seeds]


def strict_valid_counts(
    labels: np.ndarray, query_idx: np.ndarray, gallery_idx: np.ndarray, levels: Levels | None = None
) -> dict[str, int]:
    """Queries with at least one strict positive in the gallery, per level code, leaf first (paper S2).

    leaf: another gallery item of the same leaf; level k above it: same level-k group, other
    level-(k-1) group (for three levels: middle = same middle, other leaf; high = same high, other
    middle). Counting by group sizes (the size of the query's level-k group in the gallery minus that of
    its level-(k-1) group) makes a query never its own positive, even if it sits in the gallery, and
    needs memory linear in the rows and groups, never queries x gallery.
    """
    labels = np.asarray(labels, dtype=np.int64)
    codes = _levels_of(labels, levels).codes
    q = labels[np.asarray(query_idx, dtype=np.int64)]
    g = labels[np.asarray(gallery_idx, dtype=np.int64)]
    in_gallery = np.isin(np.asarray(query_idx), np.asarray(gallery_idx)).astype(np.int64)
    size = [np.bincount(g[:, i], minlength=int(labels[:, i].max(initial=-1)) + 1) for i in range(len(codes))]
    positives = [size[0][q[:, 0]] - in_gallery]
    positives += [size[k][q[:, k]] - size[k - 1][q[:, k - 1]] for k in range(1, len(codes))]
    return {code: int((p > 0).sum()) for code, p in zip(codes, positives, strict=True)}


def empty_levels(valid_counts: Sequence[dict[str, int]], levels: Levels | None = None) -> tuple[str, ...]:
    """Levels with no valid query in at least one of the given query/gallery splits (their strict valid
    counts): such a level has no score on that split, so it is left out of the hier score and of every
    table of the study instead of leaving holes that break the pairing of arms. Without `levels`, the
    codes the counts name (three-level counts: leaf, middle, high, a missing one counting as empty)."""
    if levels is not None:
        codes = levels.codes
    else:
        named = tuple(dict.fromkeys(code for v in valid_counts for code in v))
        codes = PAPER_CODES if set(named) <= set(PAPER_CODES) else named
    return tuple(code for code in codes if any(int(v.get(code, 0)) == 0 for v in valid_counts))
