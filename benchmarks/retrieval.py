"""Strict evaluation speed and memory: hierconsole.engine.retrieval against a per-query sklearn loop.

    .venv/bin/python benchmarks/retrieval.py            # about two minutes on 2 cores
    .venv/bin/python benchmarks/retrieval.py --full     # the naive loop over all 36 units too (~3 min more)

1. The 36 model x perturbation units of a CUB-sized study (12 models: 6 Euclidean, 6 Poincaré, 32-D
   embeddings of 5,794 test items; 3 Q/G perturbations of 870 queries): hierconsole's ``evaluate`` on all
   36 units, against the naive loop a researcher writes (per query: geoopt distances to the gallery,
   sklearn ``average_precision_score`` per level, an argsort per level for Recall@K). The naive loop is
   timed on --naive-queries queries of one unit per round and scaled to 36 x 870 queries unless --full;
   the two are timed in rotation and the medians of --repeats rounds compared. Both give the same mAP.
2. Peak resident memory (VmHWM of a fresh subprocess: interpreter, torch, embeddings, labels and the
   evaluation) of evaluating two units of 870 queries against 10^5 and 10^6 gallery items through
   ``evaluate_units`` at the machine's width (what the evaluate job calls).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import geoopt
import numpy as np
import torch
from sklearn.metrics import average_precision_score

from hierconsole.datasets import CUB_SIZED_CONFIG, make_synthetic, qg_perturbation
from hierconsole.engine.geometry import make_geometry
from hierconsole.engine.retrieval import DEFAULT_KS, Unit, evaluate, evaluate_units
from hierconsole.levels import Levels
from hierconsole.metrics.cores import usable_cores

N_QUERY = 870
QG_SEEDS = (42, 2024, 3407)
C, R = 2.0, 0.4


def proc_status_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmHWM: peak resident; VmRSS: resident now)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def models(features: np.ndarray, n: int = 12) -> list[tuple[str, torch.Tensor]]:
    """Embeddings of ``n`` stand-in models: random 768 -> 32 projections through each geometry's head."""
    g = torch.Generator().manual_seed(0)
    x = torch.from_numpy(features)
    out = []
    for i in range(n):
        name = "euclidean" if i % 2 == 0 else "poincare"
        w = torch.randn(x.shape[1], 32, generator=g) / x.shape[1] ** 0.5
        out.append((name, make_geometry(name, c=C, r=R).embed(x @ w)))
    return out


def naive_unit(
    geometry: str, zq: torch.Tensor, zg: torch.Tensor, lq: np.ndarray, lg: np.ndarray
) -> list[float]:
    """Mean AP per level of one unit, one query at a time (what the naive loop computes)."""
    manifold = geoopt.PoincareBall(c=C) if geometry == "poincare" else geoopt.Euclidean(ndim=1)
    k = lq.shape[1]
    aps: list[list[float]] = [[] for _ in range(k)]
    for i in range(zq.shape[0]):
        d = manifold.dist(zq[i : i + 1], zg).numpy()
        same = lg == lq[i]
        strict = [same[:, 0]] + [same[:, lvl] & ~same[:, lvl - 1] for lvl in range(1, k)]
        for lvl, pos in enumerate(strict):
            if pos.any():
                aps[lvl].append(average_precision_score(pos, -d))
                order = np.argsort(d, kind="stable")
                [bool(pos[order[:k]].any()) for k in DEFAULT_KS]  # Recall@K
    return [float(np.mean(a)) for a in aps]


def memory_child(n_gallery: int) -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    geometry = make_geometry("poincare", c=C, r=R)
    gallery = geometry.embed(torch.randn(n_gallery, 32, generator=g))
    query = geometry.embed(torch.randn(N_QUERY, 32, generator=g))
    leaf = torch.randint(0, 200, (n_gallery + N_QUERY,), generator=g)
    labels = torch.stack([leaf, leaf * 124 // 200, leaf * 37 // 200], dim=1)
    levels = Levels.default(labels.shape[1])
    before = proc_status_mib("VmRSS")
    t0 = time.perf_counter()
    # Two units (the second model a scaled copy) through what the evaluate job calls, at full width: the
    # in-flight bound must keep them from being scored side by side at this size.
    unit = Unit(query, gallery, labels[:N_QUERY], labels[N_QUERY:], geometry, labels_key=0, levels=levels)
    other = Unit(query * 0.9, gallery * 0.9, labels[:N_QUERY], labels[N_QUERY:], geometry, labels_key=0, levels=levels)
    results = list(evaluate_units([unit, other], workers=usable_cores()))
    seconds = time.perf_counter() - t0
    assert all(r.levels[levels.leaf].valid_queries > 0 for r in results)
    print(f"{before:.0f} {proc_status_mib('VmHWM'):.0f} {seconds:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a worker's default is 1)")
    ap.add_argument("--naive-queries", type=int, default=60, help="naive-loop queries timed per round")
    ap.add_argument("--galleries", default="100000,1000000", help="gallery sizes for the memory test")
    ap.add_argument("--full", action="store_true", help="time the naive loop on all 36 x 870 queries")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.memory_child:
        memory_child(args.memory_child)
        return 0
    print(
        f"# retrieval  {time.strftime('%Y-%m-%d %H:%M')}  {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{args.threads} thread(s), torch {torch.__version__}, load avg {os.getloadavg()[0]:.2f}"
    )
    fs = make_synthetic(CUB_SIZED_CONFIG)
    test = np.flatnonzero(fs.split == 2)
    labels = fs.labels
    levels = fs.taxonomy.levels  # the data's levels: the metrics are per level, whatever the depth
    units = []
    for geometry, z in models(fs.features[test]):
        for seed in QG_SEEDS:
            parts = qg_perturbation(labels, test, n_query=N_QUERY, seed=seed).parts
            q, g = np.searchsorted(test, parts["query"]), np.searchsorted(test, parts["gallery"])
            units.append((geometry, z[q], z[g], labels[parts["query"]], labels[parts["gallery"]], seed))
    print(f"{len(units)} units: {N_QUERY} queries x {len(test) - N_QUERY} gallery, 32-D\n")

    width = usable_cores()

    def sequential() -> tuple[float, list]:
        t0 = time.perf_counter()
        res = [
            evaluate(zq, zg, lq, lg, make_geometry(geo, c=C, r=R), levels=levels) for geo, zq, zg, lq, lg, _ in units
        ]
        return time.perf_counter() - t0, res

    def ours() -> tuple[float, list]:
        # what the evaluate job does: every unit at once over the usable cores, positives shared per draw
        t0 = time.perf_counter()
        batch = [
            Unit(zq, zg, lq, lg, make_geometry(geo, c=C, r=R), seed, levels)
            for geo, zq, zg, lq, lg, seed in units
        ]
        res = list(evaluate_units(batch, workers=width))
        return time.perf_counter() - t0, res

    def naive(n: int) -> float:
        geo, zq, zg, lq, lg, _ = units[1]  # a Poincaré unit: geoopt's costlier distance
        t0 = time.perf_counter()
        naive_unit(geo, zq[:n], zg, lq[:n], lg)
        return (time.perf_counter() - t0) / n

    ours()  # warm-up
    sequential()
    naive(5)
    ours_t, seq_t, naive_q = [], [], []
    for _ in range(args.repeats):
        seconds, results = ours()
        ours_t.append(seconds)
        seconds, seq_results = sequential()
        seq_t.append(seconds)
        naive_q.append(naive(args.naive_queries))
    same = all(
        np.array_equal(a.levels[lv].ap, b.levels[lv].ap) and np.array_equal(a.levels[lv].hits, b.levels[lv].hits)
        for a, b in zip(results, seq_results, strict=True)
        for lv in levels.codes
    )
    ours_s = float(np.median(ours_t))
    seq_s = float(np.median(seq_t))
    if args.full:
        t0 = time.perf_counter()
        naive_maps = [naive_unit(*u[:5]) for u in units]
        naive_s = time.perf_counter() - t0
        how = "measured on all units"
    else:
        naive_s = float(np.median(naive_q)) * N_QUERY * len(units)
        naive_maps = [naive_unit(*units[0][:5])]
        how = f"{np.median(naive_q) * 1e3:.2f} ms per query (median of {args.repeats} x {args.naive_queries}) x {N_QUERY * len(units)}"
    diff = max(
        abs(results[i].aggregate("micro")[level]["mAP"] - naive_maps[i][lvl])
        for i in range(len(naive_maps))
        for lvl, level in enumerate(levels.codes)
    )
    print(
        f"## strict evaluation of {len(units)} model x perturbation units ({levels.k} levels, mAP and R@1/5/10/20)"
    )
    print(
        f"  hierconsole evaluate_units, {width} cores: {ours_s:8.2f} s  ({ours_s / len(units) * 1e3:.0f} ms per unit)"
    )
    print(
        f"  hierconsole evaluate, one by one:   {seq_s:8.2f} s  (the sequential reference; "
        f"{seq_s / ours_s:.2f}x; bit-identical: {same})"
    )
    print(f"  naive per-query sklearn + geoopt:   {naive_s:8.2f} s  ({how})")
    print(
        f"  speed-up: {naive_s / ours_s:.1f}x  [target >= 60x: {'PASS' if naive_s / ours_s >= 60 else 'FAIL'}]"
    )
    print(f"  largest mAP difference to the naive loop: {diff:.1e}\n")

    print(f"## peak memory, {N_QUERY} queries against a large gallery (fresh process, VmHWM)")
    worst = 0.0
    for n in (int(x) for x in args.galleries.split(",") if x):
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(n), "--threads", str(args.threads)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        before, peak, seconds = float(out[0]), float(out[1]), float(out[2])
        worst = max(worst, peak)
        print(
            f"  gallery {n:>9,}: peak {peak:6.0f} MiB over the whole process (resident before evaluating: "
            f"{before:4.0f} MiB, embeddings included), two units {seconds:5.1f} s"
        )
    print(f"  [target <= 2 GiB at 10^6: {'PASS' if worst <= 2048 else 'FAIL'}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
