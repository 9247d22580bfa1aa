"""Peak memory of the frozen and pca baselines at a 10^5-sample gallery, against the evaluator's bound.

    .venv/bin/python benchmarks/baseline_memory.py            # about a minute on 2 cores
    .venv/bin/python benchmarks/baseline_memory.py --n 200000

Each measurement runs in a fresh child process (peak RSS, VmHWM, is per process and never goes down):
768-D float32 features of N samples (the DINOv2 width; 10^5 x 768 is 293 MiB) are made first and the
resident memory is read; then the step runs and the peak is read. What the step adds beyond its own output
is its working memory, which the evaluator's budget (retrieval.DEFAULT_MEMORY_BUDGET, 512 MiB) bounds:

- fit: the pca fit on 60% of the samples, as the engine does it (float64 covariance over row chunks) and as
  the first version did it (an SVD of the centred float64 [N, D] matrix), for comparison;
- embed: the frozen (L2-normalised) and pca embeddings of every sample;
- score: both baselines scored, 2,000 queries against the other samples, through retrieval.evaluate;
- score-cell: the same scoring of a trained cell's 32-D embeddings, the evaluator's own footprint that
  the baselines' scoring is compared with.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hierconsole.engine.baselines import fit_pca, l2_normalised
from hierconsole.engine.geometry import Euclidean
from hierconsole.engine.retrieval import DEFAULT_MEMORY_BUDGET, evaluate

DIM, WIDTH, N_QUERY = 768, 32, 2000
MIB = 2**20


def status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    leaf = np.arange(n) % 200
    centres = rng.standard_normal((200, DIM)).astype(np.float32)
    features = centres[leaf] + rng.standard_normal((n, DIM), dtype=np.float32)
    labels = np.stack([leaf, leaf * 124 // 200, leaf * 37 // 200], axis=1)
    return features, labels


def child(step: str, n: int) -> None:
    torch.set_num_threads(1)
    features, labels = _data(n)
    train = np.sort(np.random.default_rng(1).choice(n, int(0.6 * n), replace=False))
    # Making the data peaks higher than holding it; reset the high-water mark to what is resident now
    # (Linux: writing 5 to clear_refs), so the peak read below is the step's.
    Path("/proc/self/clear_refs").write_text("5")
    before = status_mib("VmRSS")
    t0 = time.perf_counter()
    output = 0
    if step == "fit":
        fit_pca(features, WIDTH, rows=train)
    elif step == "fit-svd":
        x = np.asarray(features[train], dtype=np.float64)
        np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    elif step == "embed":
        frozen = l2_normalised(features)
        pca = fit_pca(features, WIDTH, rows=train).transform(features)
        output = frozen.nbytes + pca.nbytes
    elif step == "score":
        frozen = l2_normalised(features)
        pca = fit_pca(features, WIDTH, rows=train).transform(features)
        output = frozen.nbytes + pca.nbytes
        lab = torch.from_numpy(labels)
        for z in (frozen, pca):
            t = torch.from_numpy(z)
            evaluate(t[:N_QUERY], t[N_QUERY:], lab[:N_QUERY], lab[N_QUERY:], Euclidean())
    elif step == "score-cell":  # the reference: a trained cell's 32-D embeddings scored the same way
        cell = torch.nn.functional.normalize(torch.from_numpy(features[:, :WIDTH].copy()), dim=1)
        output = cell.numel() * 4
        lab = torch.from_numpy(labels)
        evaluate(cell[:N_QUERY], cell[N_QUERY:], lab[:N_QUERY], lab[N_QUERY:], Euclidean())
    print(f"{before:.0f} {status_mib('VmHWM'):.0f} {output / MIB:.0f} {time.perf_counter() - t0:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    budget = DEFAULT_MEMORY_BUDGET / MIB
    print(f"N = {args.n:,} samples x {DIM} float32 ({args.n * DIM * 4 / MIB:.0f} MiB); evaluator budget {budget:.0f} MiB")
    for step in ("fit", "fit-svd", "embed", "score", "score-cell"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", step, "--n", str(args.n)], capture_output=True, text=True, check=True
        )
        before, peak, output, seconds = map(float, out.stdout.split())
        work = peak - before - output
        verdict = "within" if work <= budget else "OVER"
        print(
            f"{step:8s} resident before {before:6.0f} MiB, peak {peak:6.0f} MiB: +{peak - before:5.0f} MiB "
            f"({output:4.0f} MiB of it the output), working {work:5.0f} MiB {verdict} the budget; {seconds:.1f} s"
        )


if __name__ == "__main__":
    main()
