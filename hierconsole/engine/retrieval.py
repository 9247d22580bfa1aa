"""Strict hierarchical retrieval: positive masks, AP, Recall@K and their aggregation (paper S2).

Labels are [N, K] ancestor indices, leaf first (2 <= K <= 12). For a query q and gallery item j the
strict positives are (S2 Eqs. 1-3, for any depth)

    level 1 (leaf): y_q^1 = y_j^1
    level k > 1:    y_q^k = y_j^k and y_q^(k-1) != y_j^(k-1)

(for three levels: leaf, middle, high).

A query counts at a level only if the gallery holds at least one of its positives there ("valid").
AP follows S2 Eq. (4); Recall@K is 1 when a positive is among the first K items.

Conventions, fixed here once:
- Query and gallery are disjoint sets: nothing is excluded from the gallery for a query (no self-match).
- Ranking is by increasing distance; equal distances are ordered by gallery index (a stable sort), so
  results are deterministic and identical on CPU and GPU.
- Each query row is sorted once and that order serves all K levels (one pass, not K).
- Queries are processed in chunks whose size follows a memory budget, so a 10^6-item gallery needs a few
  hundred MiB beyond the embeddings, never a full [Q, G] matrix: each chunk's temporaries stay within the
  budget, and distances are computed for a block of chunks at a time within half the budget again.
- On CPU the sort and the label comparisons run in NumPy, whose vectorised integer kernels are several
  times faster there than torch's; other devices use torch throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hierconsole.engine.geometry import EVAL_CLIP, Geometry
from hierconsole.levels import MAX_LEVELS, MIN_LEVELS, Levels, default_hier
from hierconsole.metrics.ranking import sortable_keys as _sortable_keys
from hierconsole.vocabulary import (
    AGGREGATIONS,
    HIER_METRIC,
    MACRO,
    MAP,
    MICRO,
    RECALL_KS,
    Aggregation,
    hier_score,
)

DEFAULT_KS: tuple[int, ...] = RECALL_KS
DEFAULT_MEMORY_BUDGET = 512 * 2**20
"""Bytes of [chunk, gallery] temporaries that one query chunk may use."""
_BYTES_PER_PAIR = 64
"""Peak bytes per (query, gallery) pair inside a chunk: distance (4-8), sort values and int64 indices
(12-16, plus the sort's own copies), the packed positive bits and their ranked copy (one byte each up to
eight levels, two beyond), two levels' bool rows and, at worst, a level's nonzero() positions (16). Rounded up: the budget is a ceiling, not an estimate."""



def as_label_tensor(labels: np.ndarray | Tensor, device: torch.device | str | None = None) -> Tensor:
    """Labels as an int64 [N, K] tensor (one column per level, leaf first), on ``device`` if given."""
    t = torch.as_tensor(labels)
    if t.dim() != 2 or not MIN_LEVELS <= t.shape[1] <= MAX_LEVELS:
        raise ValueError(
            f"labels must be [N, K] with one column per level, leaf first, {MIN_LEVELS} <= K <= {MAX_LEVELS}; "
            f"got shape {tuple(t.shape)}"
        )
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise ValueError(f"labels must be integers; got {t.dtype}")
    return t.to(device=device, dtype=torch.int64)


def strict_masks(a_labels: Tensor, b_labels: Tensor) -> Tensor:
    """Bool [K, Na, Nb]: the strict level-k positives of each row of ``a`` among ``b``, leaf first.

    Level 0 is "same leaf"; level k > 0 is "same level-k ancestor, different level-(k-1) ancestor".
    No self-exclusion: within one set, the leaf mask's diagonal is True and a caller that pairs a set
    with itself (the losses) removes it.
    """
    a = a_labels.unsqueeze(1)
    b = b_labels.unsqueeze(0)
    eq = [a[..., k] == b[..., k] for k in range(a_labels.shape[-1])]
    return torch.stack([eq[0]] + [eq[k] & ~eq[k - 1] for k in range(1, len(eq))])


def _bits_dtypes(k: int) -> tuple[type[np.integer], torch.dtype]:
    # One bit per level: a byte holds eight levels; deeper trees take int16 (bits up to 1 << 11, and
    # torch's bitwise ops, gather and nonzero all support int16, not every one uint16).
    return (np.uint8, torch.uint8) if k <= 8 else (np.int16, torch.int16)


def _strict_bits(q_labels: Tensor, g_labels: Tensor) -> Tensor:
    # The K masks of strict_masks packed into one integer (bit l = level l), so that one gather by the
    # sorted order ranks all K levels at once. Bits, not one code per pair, keep each level's positive
    # set exactly strict_masks' even for labels that are not a tree.
    if q_labels.device.type == "cpu":
        return torch.from_numpy(_strict_bits_numpy(q_labels.numpy(), g_labels.numpy()))
    return _strict_bits_torch(q_labels, g_labels)


def _strict_bits_torch(q_labels: Tensor, g_labels: Tensor) -> Tensor:
    # The accelerators' path (any device; the tests run it on CPU against the NumPy one).
    m = strict_masks(q_labels, g_labels).to(_bits_dtypes(q_labels.shape[-1])[1])
    bits = m[0]
    for lvl in range(1, m.shape[0]):
        bits = bits | (m[lvl] << lvl)
    return bits


def _strict_bits_numpy(q: np.ndarray, g: np.ndarray) -> np.ndarray:
    # strict_masks in NumPy: its broadcast int32 comparisons and uint8 arithmetic are vectorised on CPU,
    # torch's broadcast comparisons are not (about 10x slower at [1000, 5000]). Two levels' equalities
    # are held at a time, whatever the depth.
    small = all(a.size == 0 or (a.min() >= -(2**31) and a.max() < 2**31) for a in (q, g))
    dtype = np.int32 if small else np.int64  # int32 compares twice as many labels per instruction
    bits_dtype = _bits_dtypes(q.shape[1])[0]
    q32 = q.astype(dtype)
    g32 = np.ascontiguousarray(g.T, dtype=dtype)
    finer = q32[:, 0, None] == g32[0][None, :]
    bits = finer.view(np.uint8).astype(bits_dtype)  # a copy for either dtype
    for lvl in range(1, q.shape[1]):
        eq = q32[:, lvl, None] == g32[lvl][None, :]
        bits += (eq & ~finer).view(np.uint8) * bits_dtype(1 << lvl)
        finer = eq
    return bits


@dataclass(frozen=True, eq=False)
class LevelResult:
    """Per-query results at one level, for the valid queries only (in query order)."""

    level: str
    query_index: np.ndarray  # int64 [V]: row in the query set
    ap: np.ndarray  # float64 [V]
    hits: np.ndarray  # bool [V, len(ks)]: a positive within the first K
    groups: np.ndarray  # int64 [V]: the query's label at this level (the group of group-macro)
    n_positives: np.ndarray  # int64 [V]: strict positives in the gallery

    @property
    def valid_queries(self) -> int:
        return int(self.query_index.shape[0])


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Strict retrieval results of one query set against one gallery, at every level of ``taxonomy``.

    ``levels`` maps each level code to its results, in ``taxonomy`` order (leaf first).
    """

    ks: tuple[int, ...]
    n_queries: int
    n_gallery: int
    levels: dict[str, LevelResult]
    taxonomy: Levels | None = None  # None: the default levels of this depth (three: leaf, middle, high)

    def __post_init__(self) -> None:
        if self.taxonomy is None:
            object.__setattr__(self, "taxonomy", Levels.default(len(self.levels)))
        assert self.taxonomy is not None
        if tuple(self.levels) != self.taxonomy.codes:
            raise ValueError(
                f"results for levels {', '.join(self.levels)} do not match {self.taxonomy.describe()}"
            )

    @property
    def level_codes(self) -> tuple[str, ...]:
        assert self.taxonomy is not None
        return self.taxonomy.codes

    def aggregate(self, how: Aggregation = MICRO) -> dict[str, dict[str, float | int]]:
        """level -> {"mAP", "R@K" for each K, "valid_queries"} (+ "groups" under "macro").

        "micro" averages over valid queries. "macro" first averages the valid queries of each group (the
        query's label at that level), then averages the group means with equal weight. A level without
        valid queries reports NaN metrics and zero counts.
        """
        if how not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {how!r}")
        out: dict[str, dict[str, float | int]] = {}
        for level in self.level_codes:
            res = self.levels[level]
            per_query = np.column_stack([res.ap, res.hits.astype(np.float64)])  # [V, 1 + len(ks)]
            if how == MICRO:
                means = _mean_rows(per_query)
            else:
                _, group_of = np.unique(res.groups, return_inverse=True)
                n_groups = int(group_of.max()) + 1 if group_of.size else 0
                sums = np.zeros((n_groups, per_query.shape[1]))
                np.add.at(sums, group_of, per_query)
                means = _mean_rows(sums / np.bincount(group_of, minlength=n_groups)[:, None])
            entry: dict[str, float | int] = {MAP: float(means[0])}
            entry.update({f"R@{k}": float(m) for k, m in zip(self.ks, means[1:], strict=True)})
            entry["valid_queries"] = res.valid_queries
            if how == MACRO:
                entry["groups"] = n_groups
            out[level] = entry
        return out

    def flat(self, how: Aggregation = MICRO, hier: Sequence[str] | None = None) -> dict[str, float]:
        """Per-seed column names: "{level}_mAP", "{level}_R@K" and the hier score "hier_mAP".

        The hier score averages the ``hier`` levels (a study's declared ones; default every level above
        the leaf).
        """
        assert self.taxonomy is not None
        agg = self.aggregate(how)
        flat = {
            f"{level}_{name}": float(value)
            for level in self.level_codes
            for name, value in agg[level].items()
            if name == MAP or name.startswith("R@")
        }
        hier_levels = default_hier(self.taxonomy) if hier is None else tuple(hier)
        flat[HIER_METRIC] = hier_score({level: float(agg[level][MAP]) for level in self.level_codes}, hier_levels)
        return flat


def _mean_rows(a: np.ndarray) -> np.ndarray:
    if a.shape[0] == 0:
        return np.full(a.shape[1], np.nan)
    return a.mean(axis=0)


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(int(k) for k in ks)
    if not ks or any(k < 1 for k in ks) or len(set(ks)) != len(ks):
        raise ValueError(f"ks must be distinct positive integers, got {ks}")
    return ks


def chunk_rows(n_gallery: int, memory_budget: int = DEFAULT_MEMORY_BUDGET) -> int:
    """Query rows per chunk so that the chunk's [rows, gallery] temporaries fit the memory budget."""
    return max(1, memory_budget // (_BYTES_PER_PAIR * max(1, n_gallery)))


def rank_order(dist: Tensor) -> Tensor:
    """Column indices of each row by increasing distance, equal distances by index (a stable sort).

    NaN ranks last, tied with +inf.
    """
    inf = float("inf")
    if dist.dtype == torch.float32 and dist.device.type == "cpu":
        return torch.from_numpy(_packed_sort(_sortable_keys(dist.numpy())))
    # + 0.0 turns -0.0 into +0.0, so the two zeros tie below
    sortable = (dist + 0.0).nan_to_num_(nan=inf, posinf=inf, neginf=-inf)
    if sortable.dtype == torch.float32:
        # IEEE-754 bit patterns sort like the floats once negative ones have their magnitude bits flipped;
        # sorting int32 keys is ~1.5x faster than sorting float32 on CPU, and the sort is most of the
        # evaluation time.
        keys = sortable.view(torch.int32)
        keys ^= (keys >> 31) & 0x7FFFFFFF
        return torch.argsort(keys, dim=-1, stable=True)
    return torch.argsort(sortable, dim=-1, stable=True)


def _packed_sort(keys: np.ndarray) -> np.ndarray:
    """Stable argsort of int32 keys [q, G] (G < 2^31) as one unstable sort of unique int64 values.

    Each key goes to the high 32 bits and its column index to the low ones: the packed values are
    distinct and order like (key, index), so any sort yields the stable order, and NumPy's vectorised
    int64 sort is about twice as fast as torch's stable argsort on CPU.
    """
    packed = keys.astype(np.int64)
    packed <<= 32
    packed |= np.arange(keys.shape[-1], dtype=np.int64)
    packed.sort(axis=-1)
    packed &= 0xFFFFFFFF
    return packed


def _pack_max_gallery(k: int) -> int:
    """Largest gallery whose column index fits between a sort key and K positive bits in an int64:
    2^29 for three levels, 2^20 (about 10^6) for twelve; larger galleries take the sort-and-gather path."""
    return 2 ** (32 - k)



def _ranked_bits(dist: Tensor, bits: Tensor, k: int) -> Tensor:
    """``bits`` permuted by each row's rank order: bit l of [i, j] says rank j of query i is a level-l positive."""
    if dist.device.type == "cpu" and dist.dtype == torch.float32 and dist.shape[-1] <= _pack_max_gallery(k):
        return torch.from_numpy(_packed_rank_bits(_sortable_keys(dist.numpy()), bits.numpy(), k))
    return bits.gather(1, rank_order(dist))


def _packed_rank_bits(keys: np.ndarray, bits: np.ndarray, k: int = 3) -> np.ndarray:
    """rank_order and the gather by it in one sort: key (32 bits) | column (32 - K) | positive bits (K).

    The column makes the values distinct and orders equal keys by index (the stable order); after the sort
    the low K bits are the ranked positive bits, with no gather (random access) over the row.
    """
    packed = keys.astype(np.int64)
    packed <<= 32
    packed |= np.arange(keys.shape[-1], dtype=np.int64) << k
    packed |= bits
    packed.sort(axis=-1)
    # the cast keeps the low byte (two for int16), the mask the positive bits
    bits_dtype = _bits_dtypes(k)[0]
    return np.bitwise_and(packed.astype(bits_dtype), bits_dtype((1 << k) - 1))


def _score_rows(
    dist: Tensor, bits: Tensor, ks: tuple[int, ...], n_levels: int = 3
) -> tuple[Tensor, Tensor, Tensor]:
    """AP [K, q] (float64), positives [K, q] (int64) and hits [K, q, len(ks)] for a [q, G] distance chunk."""
    q = dist.shape[0]
    ranked = _ranked_bits(dist, bits, n_levels)  # bit l of ranked[i, k]: rank k of query i is a level-l positive
    ap = torch.zeros(n_levels, q, dtype=torch.float64, device=dist.device)
    n_pos = torch.zeros(n_levels, q, dtype=torch.int64, device=dist.device)
    hits = torch.zeros(n_levels, q, len(ks), dtype=torch.bool, device=dist.device)
    head = ranked[:, : max(ks)]
    # One scan finds the positives of every level (a few percent of the gallery); the levels then split
    # those short lists instead of scanning the [q, G] ranking once each.
    rows_any, pos_any = ranked.nonzero(as_tuple=True)  # row-major: each row's positions in rank order
    bits_any = ranked[rows_any, pos_any]
    for lvl in range(n_levels):
        bit = 1 << lvl
        top = (head & bit) != 0
        for i, k in enumerate(ks):
            hits[lvl, :, i] = top[:, :k].any(dim=1)
        # Eq. (4) over the positives only: the j-th positive of a row, at 0-based rank p, adds j / (p + 1).
        keep = (bits_any & bit) != 0
        rows, pos = rows_any[keep], pos_any[keep]
        n_pos[lvl] = torch.bincount(rows, minlength=q)
        first = torch.cumsum(n_pos[lvl], 0) - n_pos[lvl]
        j = torch.arange(1, rows.shape[0] + 1, device=dist.device) - first[rows]
        ap[lvl].index_add_(0, rows, j.to(torch.float64) / (pos + 1).to(torch.float64))
    ap /= n_pos.clamp_min(1)
    return ap, n_pos, hits


def _evaluate_rows(
    n_queries: int,
    n_gallery: int,
    distances_for,  # (start, stop) -> [stop - start, G] distances
    q_labels: Tensor,
    g_labels: Tensor,
    ks: tuple[int, ...],
    chunk_size: int,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    bits_for: Callable[[int, int], Tensor] | None = None,
    levels: Levels | None = None,
) -> Evaluation:
    levels = _levels_of(q_labels, levels)
    n_levels = levels.k
    # Distances come in blocks of several chunks: computing them prepares the whole gallery side again
    # (a few passes over [G, D]), which at 10^6 items costs more than scoring a small chunk. A block's
    # distances take at most half the budget on top of the chunk's temporaries.
    per_block = max(1, (memory_budget // 2) // (8 * max(1, n_gallery) * chunk_size))
    block = chunk_size * per_block
    # Results go into arrays allocated once: a list of small per-chunk tensors, freed in between large
    # temporaries, fragments the heap so that a long evaluation's resident memory creeps up.
    ap_all = np.zeros((n_levels, n_queries))
    n_pos_all = np.zeros((n_levels, n_queries), dtype=np.int64)
    hits_all = np.zeros((n_levels, n_queries, len(ks)), dtype=bool)
    with torch.no_grad():
        for b0 in range(0, n_queries, block):
            dist_block = distances_for(b0, min(b0 + block, n_queries))
            for start in range(b0, min(b0 + block, n_queries), chunk_size):
                stop = min(start + chunk_size, n_queries)
                bits = _strict_bits(q_labels[start:stop], g_labels) if bits_for is None else bits_for(start, stop)
                ap, n_pos, hits = _score_rows(dist_block[start - b0 : stop - b0], bits, ks, n_levels)
                ap_all[:, start:stop] = ap.cpu().numpy()
                n_pos_all[:, start:stop] = n_pos.cpu().numpy()
                hits_all[:, start:stop] = hits.cpu().numpy()
            del dist_block
    labels_np = q_labels.cpu().numpy()
    results = {}
    for lvl, level in enumerate(levels.codes):
        valid = np.flatnonzero(n_pos_all[lvl] > 0)
        results[level] = LevelResult(
            level=level,
            query_index=valid.astype(np.int64),
            ap=ap_all[lvl, valid],
            hits=hits_all[lvl, valid],
            groups=labels_np[valid, lvl],
            n_positives=n_pos_all[lvl, valid],
        )
    return Evaluation(ks=ks, n_queries=n_queries, n_gallery=n_gallery, levels=results, taxonomy=levels)


def _levels_of(labels: Tensor, levels: Levels | None) -> Levels:
    """The given levels, checked against the label columns; else the default levels of that depth."""
    k = labels.shape[-1]
    if levels is None:
        return Levels.default(k)
    if levels.k != k:
        raise ValueError(f"labels have {k} columns but the taxonomy has {levels.k} levels ({levels.describe()})")
    return levels


def evaluate(
    query_emb: Tensor,
    gallery_emb: Tensor,
    q_labels: np.ndarray | Tensor,
    g_labels: np.ndarray | Tensor,
    geometry: Geometry,
    ks: Sequence[int] = DEFAULT_KS,
    chunk_size: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    levels: Levels | None = None,
) -> Evaluation:
    """Strict retrieval of every query against the gallery under ``geometry``'s distance, at every level.

    Runs on the embeddings' device. Distances use ``geometry.pairwise`` clipped at EVAL_CLIP. Queries are
    taken ``chunk_size`` at a time (default: as many as ``memory_budget`` allows for this gallery).
    ``levels`` names the label columns (default: the default levels of their count).
    """
    ks = _check_ks(ks)
    if query_emb.dim() != 2 or gallery_emb.dim() != 2 or query_emb.shape[1] != gallery_emb.shape[1]:
        raise ValueError(
            f"embeddings must be [Q, D] and [G, D]; got {tuple(query_emb.shape)} and {tuple(gallery_emb.shape)}"
        )
    device = gallery_emb.device
    q_lab = as_label_tensor(q_labels, device)
    g_lab = as_label_tensor(g_labels, device)
    _check_rows(query_emb.shape[0], q_lab, gallery_emb.shape[0], g_lab)
    levels = _levels_of(q_lab, levels)
    chunk = chunk_size or chunk_rows(gallery_emb.shape[0], memory_budget)
    return _evaluate_embeddings(
        query_emb, gallery_emb, q_lab, g_lab, geometry, ks, chunk, memory_budget, levels=levels
    )


def _evaluate_embeddings(
    query_emb: Tensor,
    gallery_emb: Tensor,
    q_lab: Tensor,
    g_lab: Tensor,
    geometry: Geometry,
    ks: tuple[int, ...],
    chunk: int,
    memory_budget: int,
    bits_for: Callable[[int, int], Tensor] | None = None,
    levels: Levels | None = None,
) -> Evaluation:
    def distances_for(start: int, stop: int) -> Tensor:
        return geometry.pairwise(query_emb[start:stop], gallery_emb, clip_max=EVAL_CLIP)

    return _evaluate_rows(
        query_emb.shape[0],
        gallery_emb.shape[0],
        distances_for,
        q_lab,
        g_lab,
        ks,
        chunk,
        memory_budget,
        bits_for,
        levels,
    )


@dataclass(frozen=True, eq=False)
class Unit:
    """One query set against one gallery under one geometry: a model x perturbation cell of an evaluation.

    Units with the same ``labels_key`` (the perturbation) must have the same query and gallery labels:
    their strict positives are then computed once and shared.
    """

    query_emb: Tensor
    gallery_emb: Tensor
    q_labels: np.ndarray | Tensor
    g_labels: np.ndarray | Tensor
    geometry: Geometry
    labels_key: Hashable | None = None
    levels: Levels | None = None  # the label columns' levels (default: the default levels of their count)


def unit_bytes(n_queries: int, n_gallery: int, memory_budget: int = DEFAULT_MEMORY_BUDGET) -> int:
    """Ceiling of one unit's scoring temporaries: its chunk's pairs and its block of distances."""
    chunk = min(n_queries, chunk_rows(n_gallery, memory_budget))
    per_block = max(1, (memory_budget // 2) // (8 * max(1, n_gallery) * chunk))
    return chunk * n_gallery * _BYTES_PER_PAIR + min(n_queries, chunk * per_block) * n_gallery * 8


def evaluate_units(
    units: Sequence[Unit],
    workers: int = 1,
    ks: Sequence[int] = DEFAULT_KS,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    max_in_flight: int = 2 * DEFAULT_MEMORY_BUDGET,
) -> Iterator[Evaluation]:
    """``evaluate`` of every unit, yielded in unit order, with up to ``workers`` units scored at once.

    Each unit is scored exactly as ``evaluate(..., memory_budget=memory_budget)`` scores it alone, with
    torch at one intra-op thread, so the results do not depend on ``workers``: the width comes from
    threads (the sort, the GEMM and the label comparisons release the GIL), not from splitting a unit.
    Units in flight are limited so that their temporaries together stay within ``max_in_flight`` bytes
    (a 10^6-item gallery is scored one unit at a time). Strict positives are shared between units of
    one ``labels_key`` while all of them fit in a quarter of that bound. CPU only runs in parallel.
    """
    ks = _check_ks(ks)
    prepared = []
    for u in units:
        if u.query_emb.dim() != 2 or u.gallery_emb.dim() != 2 or u.query_emb.shape[1] != u.gallery_emb.shape[1]:
            raise ValueError(
                "embeddings must be [Q, D] and [G, D]; "
                f"got {tuple(u.query_emb.shape)} and {tuple(u.gallery_emb.shape)}"
            )
        device = u.gallery_emb.device
        q_lab = as_label_tensor(u.q_labels, device)
        g_lab = as_label_tensor(u.g_labels, device)
        _check_rows(u.query_emb.shape[0], q_lab, u.gallery_emb.shape[0], g_lab)
        _levels_of(q_lab, u.levels)  # a mismatch fails here, before any unit is scored
        prepared.append((u, q_lab, g_lab))
    on_cpu = all(u.gallery_emb.device.type == "cpu" for u, _, _ in prepared)
    largest = max((unit_bytes(u.query_emb.shape[0], u.gallery_emb.shape[0], memory_budget) for u in units), default=1)
    width = max(1, min(workers if on_cpu else 1, len(units), max_in_flight // max(1, largest)))

    shared: dict[Hashable, Tensor] = {}
    cache_left = max_in_flight // 4
    for u, q_lab, g_lab in prepared:
        key = u.labels_key
        if key is None or key in shared:
            continue
        size = q_lab.shape[0] * g_lab.shape[0]
        if size <= cache_left:
            shared[key] = _strict_bits(q_lab, g_lab)
            cache_left -= size

    def score(item: tuple[Unit, Tensor, Tensor]) -> Evaluation:
        u, q_lab, g_lab = item
        chunk = chunk_rows(u.gallery_emb.shape[0], memory_budget)
        full = shared.get(u.labels_key) if u.labels_key is not None else None
        bits_for = None if full is None else (lambda a, b: full[a:b])
        return _evaluate_embeddings(
            u.query_emb, u.gallery_emb, q_lab, g_lab, u.geometry, ks, chunk, memory_budget, bits_for, u.levels
        )

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if width == 1:
            for item in prepared:
                yield score(item)
        else:
            # Every unit is submitted at once (in-flight memory is bounded by the pool's width); a consumer
            # that stops early (a cancelled job) drops the units not yet started instead of waiting for them.
            pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="hierconsole-score")
            try:
                futures = [pool.submit(score, item) for item in prepared]
                for future in futures:
                    yield future.result()
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    finally:
        torch.set_num_threads(threads)


def _check_rows(n_q: int, q_lab: Tensor, n_g: int, g_lab: Tensor) -> None:
    if q_lab.shape[1] != g_lab.shape[1]:
        raise ValueError(
            f"query labels have {q_lab.shape[1]} levels and gallery labels {g_lab.shape[1]}: "
            "both must have one column per level of the same taxonomy"
        )
    if q_lab.shape[0] != n_q or g_lab.shape[0] != n_g:
        raise ValueError(
            f"label rows do not match embeddings: {q_lab.shape[0]} query labels for {n_q} queries, "
            f"{g_lab.shape[0]} gallery labels for {n_g} gallery items"
        )
