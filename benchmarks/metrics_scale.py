"""hierconsole.metrics.evaluate at iNaturalist scale, against a naive full-matrix evaluator in the same run.

    .venv/bin/python benchmarks/metrics_scale.py                       # ~6 min on 2 cores: 10^4 x 10^6 x 7 levels
    .venv/bin/python benchmarks/metrics_scale.py --queries 1000        # ~1 min
    .venv/bin/python benchmarks/metrics_scale.py --naive-queries 1000 --naive-gallery 100000

Data: a 7-level tree of iNaturalist's shape (10,000 species, 4,000 genera, 1,100 families, 270 orders, 50
classes, 13 phyla, 3 kingdoms), a gallery of 10^6 and 10^4 queries of uniform species, 32-D float32
embeddings (the study's projector width) drawn around nested class centres, so the rankings are neither
perfect nor random. Every metric is asked for: mAP and R@1, R@10 at each level, H-AP, ASI, NDCG@10,
mistake severity@1 and @10, CPCC.

Each measurement runs in a child process: the data are made, the resident memory read (VmRSS), the peak
reset (/proc/self/clear_refs) and the evaluation run; its peak (VmHWM) less the resident memory before is
what the evaluation added beyond the embeddings and labels. The breakdown times each stage of one
worker over a few chunks.

The naive evaluator holds the whole [Q, G] problem as HAPPIER and metric-learning evaluators do: the
distance matrix, a full argsort, the ranked tree distances, per-level cumulative counts ([K, Q, G]). It is
run at the full size under an address-space limit of 20 GiB (this machine has 24) to say where it stops,
and measured at a size where it fits, where its numbers must equal ours.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SIZES = (10_000, 4_000, 1_100, 270, 50, 13, 3)
METRICS = ("mAP", "R@1", "R@10", "H-AP", "ASI", "NDCG@10", "mistake_severity@1", "mistake_severity@10", "CPCC")
DIM = 32
LIMIT = 20 * 2**30


def make_data(n_query: int, n_gallery: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    parents = [np.arange(SIZES[i]) * SIZES[i + 1] // SIZES[i] for i in range(len(SIZES) - 1)]

    def labels(leaf: np.ndarray) -> np.ndarray:
        cols = [leaf]
        for parent in parents:
            cols.append(parent[cols[-1]])
        return np.stack(cols, axis=1)

    centres = [rng.normal(size=(s, DIM)).astype(np.float32) * 0.6**i for i, s in enumerate(SIZES)]

    def embed(lab: np.ndarray) -> np.ndarray:
        x = rng.standard_normal((len(lab), DIM), dtype=np.float32) * 1.5
        for i in range(len(SIZES)):
            x += centres[i][lab[:, i]]
        return x

    g_lab, q_lab = labels(rng.integers(0, SIZES[0], n_gallery)), labels(rng.integers(0, SIZES[0], n_query))
    return embed(q_lab), embed(g_lab), q_lab, g_lab


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def naive(q, g, q_lab, g_lab) -> dict[str, np.ndarray]:
    """Every metric from whole [Q, G] matrices (the textbook way; per-query values)."""
    from hierconsole.metrics.distances import pairwise_distances
    from hierconsole.taxonomy import relation_codes

    levels = q_lab.shape[1]
    d = pairwise_distances(q, g)  # the same distances (and so the same ranking) as ours
    order = np.argsort(d, axis=1, kind="stable")
    del d
    h = np.take_along_axis(relation_codes(q_lab, g_lab), order, axis=1).astype(np.int64)
    del order
    rank = np.arange(1, h.shape[1] + 1)
    out: dict[str, np.ndarray] = {}
    cum = np.stack([np.cumsum(h == lvl, axis=1) for lvl in range(levels)])  # [K, Q, G]
    counts = cum[:, :, -1].T  # [Q, K]
    ap = ((cum * (h[None] == np.arange(levels)[:, None, None])) / rank).sum(2).T
    with np.errstate(invalid="ignore", divide="ignore"):
        out["mAP"] = np.where(counts > 0, ap / counts, np.nan)
        first = np.argmax(np.moveaxis(cum, 0, 2) > 0, axis=1) + 1  # [Q, K]
        for k in (1, 10):
            out[f"R@{k}"] = np.where(counts > 0, (first <= k).astype(float), np.nan)
        # H-AP (pop relevance), HAPPIER's formula over the whole ranking
        rel_level = ((levels - np.arange(levels)) / levels) / counts  # [Q, K]
        rel_level = np.where(counts > 0, rel_level, 0.0)
        rel = np.concatenate([rel_level, np.zeros((len(q), 1))], axis=1)
        ranked_rel = np.take_along_axis(rel, h, axis=1)
        hrank = sum(np.minimum(ranked_rel, rel_level[:, lvl : lvl + 1]) * cum[lvl] for lvl in range(levels))
        out["H-AP"] = (hrank / rank).sum(1) / (rel_level * counts).sum(1)
        # ASI at R
        related = counts.sum(1)
        ideal = np.sort(h, axis=1)
        si = sum(np.minimum(cum[lvl], np.cumsum(ideal == lvl, axis=1)) for lvl in range(levels))
        out["ASI"] = ((si / rank) * (rank[None] <= related[:, None])).sum(1) / related
        gain = 2.0 ** (levels - h[:, :10]) - 1.0
        ideal_gain = 2.0 ** (levels - ideal[:, :10]) - 1.0
        disc = 1.0 / np.log2(np.arange(2, 12))
        out["NDCG@10"] = (gain * disc).sum(1) / (ideal_gain * disc).sum(1)
        for k in (1, 10):
            top = h[:, :k]
            mistakes = (top > 0).sum(1)
            out[f"mistake_severity@{k}"] = np.where(mistakes > 0, np.where(top > 0, top, 0).sum(1) / mistakes, np.nan)
    # CPCC: every pair of leaf centroids at once
    leaves, first, inverse = np.unique(g_lab[:, 0], return_index=True, return_inverse=True)
    sums = np.zeros((leaves.size, g.shape[1]))
    np.add.at(sums, inverse, g)
    centroids = (sums / np.bincount(inverse)[:, None]).astype(g.dtype)
    upper = np.triu_indices(leaves.size, k=1)
    between = pairwise_distances(centroids, centroids)[upper]
    tree = relation_codes(g_lab[first], g_lab[first])[upper]
    out["CPCC"] = np.array([np.corrcoef(between, tree)[0, 1]])
    return out


def child(args: argparse.Namespace) -> None:
    q, g, q_lab, g_lab = make_data(args.queries, args.gallery)
    before = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    t0 = time.perf_counter()
    result: dict = {"resident_before": before}
    if args.which == "ours":
        from hierconsole.metrics import evaluate

        r = evaluate(q, g, q_lab, g_lab, metrics=METRICS, workers=args.workers)
        result["table"] = {str(k): v for k, v in r.to_dict().items()}
        if args.save:
            np.savez(args.save, **{f"L_{k}": v for k, v in r.per_level.items()}, **{f"Q_{k}": v for k, v in r.per_query.items()})
    elif args.which == "naive":
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
        try:
            out = naive(q, g, q_lab, g_lab)
        except MemoryError as e:
            result["failed"] = f"MemoryError: {e}"
            out = None
        if out is not None and args.save:
            np.savez(args.save, **out)
    else:  # breakdown: one worker's stages over a few chunks
        from hierconsole.metrics.distances import to_gallery
        from hierconsole.metrics.evaluation import BYTES_PER_PAIR, MEMORY_BUDGET
        from hierconsole.metrics.labels import Tree
        from hierconsole.metrics.ranking import index_bits, ranked_heights
        from hierconsole.metrics.relevance import relevance
        from hierconsole.metrics.scan import scan

        stages = dict.fromkeys(("tree", "distances", "tree distances", "sort", "pass"), 0.0)
        t = time.perf_counter()
        tree = Tree(q_lab, g_lab)
        stages["tree"] += time.perf_counter() - t
        rows = MEMORY_BUDGET // (2 * BYTES_PER_PAIR * len(g))
        to_g, index = to_gallery("euclidean", g), index_bits(len(g))
        bufs = (np.empty((rows, len(g)), np.float32), np.empty((rows, len(g)), np.int64), np.empty((rows, len(g)), np.uint8))
        ks = np.array([1, 10])
        for start in range(0, min(len(q), 8 * rows), rows):
            stop = min(start + rows, len(q))
            n = stop - start
            t = time.perf_counter()
            d = to_g(q[start:stop], bufs[0][:n])
            t1 = time.perf_counter()
            h, counts = tree.chunk(start, stop, out=bufs[2][:n])
            t2 = time.perf_counter()
            ranked = ranked_heights(d, h, out=bufs[1][:n], index=index)
            t3 = time.perf_counter()
            outs = (np.empty((n, 7)), np.empty((n, 7, 2)), np.empty(n), np.empty(n), np.empty((n, 2)), np.empty((n, 2)))
            scan(ranked, counts, relevance(counts), ks, ks, True, *outs)
            t4 = time.perf_counter()
            for name, dt in zip(("distances", "tree distances", "sort", "pass"), (t1 - t, t2 - t1, t3 - t2, t4 - t3), strict=True):
                stages[name] += dt
            result["queries"] = stop
        result["stages"] = stages
    result["seconds"] = time.perf_counter() - t0
    result["peak_added"] = _status("VmHWM") - before
    print(json.dumps(result))


def run_child(which: str, queries: int, gallery: int, workers: int | None = None, save: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", which, "--queries", str(queries), "--gallery", str(gallery)]
    if workers:
        cmd += ["--workers", str(workers)]
    if save:
        cmd += ["--save", save]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"failed": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--gallery", type=int, default=1_000_000)
    parser.add_argument("--naive-queries", type=int, default=1_000)
    parser.add_argument("--naive-gallery", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--child", choices=("ours", "naive", "breakdown"))
    parser.add_argument("--save")
    args = parser.parse_args()
    if args.child:
        args.which = args.child
        child(args)
        return
    gib = 2**30
    print(f"tree {' / '.join(map(str, SIZES))}; {DIM}-D float32; metrics {', '.join(METRICS)}")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        small = (args.naive_queries, args.naive_gallery)
        a = run_child("ours", *small, save=f"{tmp}/ours.npz", workers=args.workers)
        b = run_child("naive", *small, save=f"{tmp}/naive.npz")
        print(f"\n{small[0]:,} queries x {small[1]:,} gallery (where the naive evaluator fits):")
        print(f"  ours   {a['seconds']:7.1f} s   peak +{a['peak_added'] / gib:5.2f} GiB")
        if "failed" in b:
            print(f"  naive  failed: {b['failed']}")
        else:
            print(f"  naive  {b['seconds']:7.1f} s   peak +{b['peak_added'] / gib:5.2f} GiB   "
                  f"ours/naive time {a['seconds'] / b['seconds']:.2f}, memory {a['peak_added'] / b['peak_added']:.3f}")
            ours, theirs = np.load(f"{tmp}/ours.npz"), np.load(f"{tmp}/naive.npz")
            worst, worst_name = 0.0, ""
            for name in theirs.files:
                if name == "CPCC":
                    mine = np.array([a["table"]["hierarchy"]["CPCC"]])
                else:
                    mine = ours[f"L_{name}"] if f"L_{name}" in ours.files else ours[f"Q_{name}"]
                assert np.array_equal(np.isnan(mine), np.isnan(theirs[name])), name
                diff = float(np.nanmax(np.abs(mine - theirs[name])))
                worst, worst_name = max((worst, worst_name), (diff, name))
            print(f"  every per-query value equal to the naive evaluator's: max |diff| {worst:.1e} ({worst_name})")
    full = (args.queries, args.gallery)
    print(f"\n{full[0]:,} queries x {full[1]:,} gallery x {len(SIZES)} levels:")
    c = run_child("naive", *full)
    print(f"  naive  stops: {c.get('failed', 'did not fail?')} (its distance matrix alone is "
          f"{full[0] * full[1] * 4 / gib:.0f} GiB in float32; limit {LIMIT / gib:.0f} GiB)")
    d = run_child("breakdown", *full)
    per_q = {k: 1000 * v / d["queries"] for k, v in d["stages"].items() if k != "tree"}
    print(f"  breakdown, one worker, {d['queries']} queries: " + ", ".join(f"{k} {v:.1f}" for k, v in per_q.items())
          + f" ms a query; the tree {d['stages']['tree']:.1f} s once")
    e = run_child("ours", *full, workers=args.workers)
    if "failed" in e:
        print(f"  ours failed: {e['failed']}")
        return
    print(f"  ours   {e['seconds']:7.1f} s ({1000 * e['seconds'] / full[0]:.1f} ms a query)   peak +{e['peak_added'] / gib:.2f} GiB"
          f" beyond the embeddings ({e['resident_before'] / gib:.2f} GiB resident before)")
    print("  " + json.dumps(e["table"]))


if __name__ == "__main__":
    main()
