"""Training speed: hierconsole's factorial trainer against a naive researcher loop, and against bare GEMMs.

    .venv/bin/python benchmarks/train_factorial.py            # a few minutes on 2 cores
    .venv/bin/python benchmarks/train_factorial.py --full     # also runs both whole factorials for real
    .venv/bin/python benchmarks/train_factorial.py --epochs-only   # the per-epoch tables and step breakdown

Prints, for CUB-sized synthetic data (5,994 x 768 train, 200/124/37 taxonomy, batch 128, 46 steps/epoch):
1. seconds per epoch for one seed's four cells, timed in rotation (median of --repeats): the naive loop
   (one cell at a time, DataLoader over a TensorDataset, eager PyTorch, geoopt distances by broadcasting),
   hierconsole's batched and per-cell engines, and the GEMMs alone at the same shapes (the floor), then
   one batched step's median milliseconds part by part (dropout draws, forward, heads and losses,
   backward, clipping, AdamW) against the GEMMs' share of a step;
2. parallel seeds: the 3 seed jobs as worker processes (checkpoints every epoch, validation every 10) as
   2 processes x 1 thread, 1 process x 2 threads and 3 processes x 1 thread, for the demo data (its
   preset's 20 epochs, measured) and the CUB-sized data (100 epochs: --e2e-epochs measured, the rest
   added at the measured per-epoch pace, unless --full);
3. end-to-end seconds for the whole 12-run x 100-epoch factorial: hierconsole in each parallel mode
   against the naive loop at its faster thread count (300 x its measured epoch time, or run for real
   with --full).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import geoopt
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent))

from factorial_setup import (  # noqa: E402
    SEEDS,
    cells,
    epoch_intervals,
    hyper,
    median,
    prepare_dataset,
    run_workers,
    write_job,
)

from hierconsole.engine.losses import regression_loss, taxonomy_supcon_loss  # noqa: E402
from hierconsole.engine.trainer import FactorialTrainer, initial_state  # noqa: E402

PRESET_EPOCHS = {"demo": 20, "cub": 100}
GEMM_TARGETS = {1: 0.70, 2: 0.55}  # issue 28: GEMM-only time / batched epoch, by thread count
MODES = (("2 procs x 1 thread", 2, 1), ("1 proc x 2 threads", 1, 2), ("3 procs x 1 thread", 3, 1))


# -- the naive baseline --------------------------------------------------------------------------------
class NaiveCell(nn.Module):
    """What a researcher writes: an nn.Sequential MLP and geoopt for the ball."""

    def __init__(self, in_dim: int, geometry: str, h):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, h.training.hidden),
            nn.BatchNorm1d(h.training.hidden),
            nn.ReLU(),
            nn.Dropout(h.training.dropout),
            nn.Linear(h.training.hidden, h.training.out_dim),
        )
        self.geometry, self.r = geometry, h.geometry.poincare.r
        self.ball = geoopt.PoincareBall(c=h.geometry.poincare.c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.mlp(x)
        if self.geometry == "euclidean":
            return F.normalize(t, dim=-1)
        n = t.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return self.ball.projx(self.ball.expmap0(self.r * torch.tanh(n) * t / n))

    def distances(self, z: torch.Tensor) -> torch.Tensor:
        if self.geometry == "euclidean":
            d = (z.unsqueeze(1) - z.unsqueeze(0)).norm(dim=-1)
        else:
            d = self.ball.dist(z.unsqueeze(1), z.unsqueeze(0))
        return d.clamp(max=20.0)


class NaiveRun:
    """One cell trained the naive way; its state persists across timed epochs."""

    def __init__(self, cell, x: torch.Tensor, y: torch.Tensor, h, seed: int):
        torch.manual_seed(seed)
        self.cell, self.h = cell, h
        self.model = NaiveCell(x.shape[1], cell.geometry, h)
        self.model.mlp.load_state_dict(
            {
                k.replace("fc1", "0").replace("bn", "1").replace("fc2", "4"): v
                for k, v in initial_state(seed, x.shape[1], h.training).items()
            }
        )
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=h.training.lr, weight_decay=h.training.weight_decay)
        gen = torch.Generator().manual_seed(seed)
        self.loader = DataLoader(
            TensorDataset(x, y), batch_size=h.training.batch_size, shuffle=True, drop_last=True, generator=gen
        )

    def epoch(self) -> None:
        self.model.train()
        for xb, yb in self.loader:
            d = self.model.distances(self.model(xb))
            if self.cell.loss == "regression":
                loss = regression_loss(d, yb, targets=self.h.training.regression_targets)
            else:
                loss = taxonomy_supcon_loss(d, yb, self.cell.tau, weights=self.h.training.level_weights)
            self.opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.h.training.grad_clip)
            self.opt.step()


# -- the GEMM floor ------------------------------------------------------------------------------------
class GemmOnly:
    """Every matrix product of a batched training step at its real shapes, and nothing else."""

    def __init__(self, steps: int, in_dim: int, h, n_cells: int = 4):
        b, d, hid, o, c = h.training.batch_size, in_dim, h.training.hidden, h.training.out_dim, n_cells
        g = torch.Generator().manual_seed(0)
        r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
        self.steps = steps
        self.x, self.w1, self.g1 = r(b, d), r(c * hid, d), r(b, c * hid)
        self.a, self.w2, self.g2 = r(c, b, hid), r(c, o, hid), r(c, b, o)
        self.left, self.right, self.gd = r(c, b, o + 2), r(c, b, o + 2), r(c, b, b)
        self.z = r(c, b, o)
        # multiply-adds per step: fc1 forward and weight gradient; fc2 forward, weight and input gradients;
        # the distance GEMM and its backward product
        self.flops = 2 * (2 * b * d * c * hid + 3 * c * b * hid * o + c * b * b * (o + 2) + c * b * b * o)

    def epoch(self) -> None:
        for _ in range(self.steps):
            F.linear(self.x, self.w1)
            self.g1.t() @ self.x
            torch.bmm(self.a, self.w2.transpose(1, 2))
            torch.bmm(self.g2.transpose(1, 2), self.a)
            torch.bmm(self.g2, self.w2)
            torch.bmm(self.left, self.right.transpose(1, 2))
            torch.bmm(self.gd, self.z)


# -- where a batched step's time goes -------------------------------------------------------------------
STEP_PARTS = ("dropout draws", "forward (2 layers)", "heads + losses (closed form)", "backward", "clip", "AdamW")


def step_breakdown(x: torch.Tensor, y: torch.Tensor, h, threads: int, steps: int = 120) -> dict[str, float]:
    """Median milliseconds of each part of BatchedCells.step (the same calls, timed one by one).

    At one thread the clock is the thread's CPU time, which a loaded machine's preemptions do not
    inflate (the wall clock does, by whole time slices); with more threads it is the wall clock.
    """
    clock = time.thread_time if threads == 1 else time.perf_counter
    from hierconsole.engine.batched import BatchedCells, _FusedLoss, cell_noise, clip_per_cell_
    from hierconsole.engine.trainer import CellRng

    torch.set_num_threads(threads)
    tr = h.training
    bc = BatchedCells(cells(), x.shape[1], tr, h.geometry.poincare, torch.device("cpu"))
    init = initial_state(SEEDS[0], x.shape[1], tr)
    bc.load([init] * bc.n_cells, [{"state": {}}] * bc.n_cells)
    rngs = [CellRng(torch.device("cpu"), SEEDS[0] + i) for i in range(bc.n_cells)]
    gen = torch.Generator().manual_seed(0)
    parts: dict[str, list[float]] = {k: [] for k in (*STEP_PARTS, "whole step")}
    bc.net.train()
    for it in range(steps + 20):
        idx = torch.randint(0, x.shape[0], (tr.batch_size,), generator=gen)
        xb, yb = x[idx], y[idx]
        t = [clock()]
        noise = cell_noise(rngs, tr.batch_size, tr.hidden, tr.dropout, xb.dtype, xb.device)
        t.append(clock())
        raw = bc.net(xb, noise)
        t.append(clock())
        loss = _FusedLoss.apply(raw, bc, yb, None)
        t.append(clock())
        bc.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()
        t.append(clock())
        clip_per_cell_(bc.params, tr.grad_clip)
        t.append(clock())
        bc.optimizer.step()
        t.append(clock())
        if it >= 20:  # warm-up steps untimed
            for name, a, b in zip(STEP_PARTS, t, t[1:], strict=False):
                parts[name].append((b - a) * 1e3)
            parts["whole step"].append((t[-1] - t[0]) * 1e3)
    gemm = GemmOnly(46, x.shape[1], h, bc.n_cells)
    rounds = []
    for _ in range(5):  # the same products at the same shapes, on the same clock
        t0 = clock()
        gemm.epoch()
        rounds.append((clock() - t0) / gemm.steps * 1e3)
    out = {k: median(v) for k, v in parts.items()}
    out["GEMMs alone"] = median(rounds)
    return out


# -- timing --------------------------------------------------------------------------------------------
def trainer_epoch(root: Path, fs, fs_dir: Path, threads: int, batched: bool) -> float:
    """One epoch of hierconsole's trainer from a fresh job: the epoch loop's own time (event "seconds")."""
    spec = write_job(
        Path(tempfile.mkdtemp(dir=root)),
        fs,
        fs_dir,
        seed=SEEDS[0],
        epochs=1,
        threads=threads,
        batched=batched,
        validate=False,
    )
    events: list[dict] = []
    FactorialTrainer(spec, events.append).run()
    return next(e.seconds for e in events if e.KIND == "epoch")


def per_epoch(args, root: Path, fs, fs_dir: Path, threads: int) -> dict[str, float]:
    h = hyper(1)
    train = np.flatnonzero(fs.split == 0)
    x = torch.from_numpy(fs.features[train])
    y = torch.from_numpy(fs.labels[train])
    torch.set_num_threads(threads)
    naive = [NaiveRun(c, x, y, h, SEEDS[0]) for c in cells()]
    gemm = GemmOnly(len(train) // h.training.batch_size, x.shape[1], h)

    def timed(fn) -> float:
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    variants = {
        "naive (DataLoader, one cell at a time, geoopt)": lambda: timed(lambda: [r.epoch() for r in naive]),
        "hierconsole batched": lambda: trainer_epoch(root, fs, fs_dir, threads, True),
        "hierconsole per-cell (reference)": lambda: trainer_epoch(root, fs, fs_dir, threads, False),
        "GEMMs only (same shapes)": lambda: timed(gemm.epoch),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():  # warm-up, untimed
        fn()
    for _ in range(args.repeats):
        for name, fn in variants.items():  # in rotation, so drifts in machine load hit every variant
            times[name].append(fn())
    out = {name: median(v) for name, v in times.items()}
    out["gemm_flops_per_epoch"] = gemm.flops * gemm.steps
    return out


def e2e_estimates(root: Path, fs, fs_dir: Path, name: str, epochs: int, target: int, repeats: int) -> dict:
    """Wall seconds of the 3-seed factorial per mode (median over rounds, modes in rotation).

    Measured at ``epochs``; when that is short of ``target``, the remaining epochs are added at the
    measured per-epoch pace (median interval between checkpoints, so training, validation and checkpoint
    included) along the schedule's critical path: jobs run in rounds of ``parallel``, each round as slow
    as its slowest job.
    """
    out: dict[str, list[tuple[float, float]]] = {}
    run = 0
    for _ in range(repeats):
        for mode, parallel, threads in MODES:
            run += 1
            specs = [
                write_job(
                    root / f"e2e-{name}-{run}-{seed}", fs, fs_dir, seed=seed, epochs=epochs, threads=threads
                )
                for seed in SEEDS
            ]
            wall = run_workers(specs, parallel)
            estimate = wall
            if target > epochs:
                paces = [median(epoch_intervals(s)) for s in specs]
                rounds = [paces[i : i + parallel] for i in range(0, len(paces), parallel)]
                estimate += (target - epochs) * sum(max(r) for r in rounds)
            out.setdefault(mode, []).append((wall, estimate))
    return {mode: (median([w for w, _ in v]), median([e for _, e in v])) for mode, v in out.items()}


def naive_full(fs) -> float:
    h = hyper(100)
    train = np.flatnonzero(fs.split == 0)
    x, y = torch.from_numpy(fs.features[train]), torch.from_numpy(fs.labels[train])
    t0 = time.perf_counter()
    for seed in SEEDS:
        for c in cells():
            run = NaiveRun(c, x, y, h, seed)
            for _ in range(h.training.epochs):
                run.epoch()
    return time.perf_counter() - t0


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds per variant (median reported)")
    ap.add_argument("--threads", default="1,2", help="thread counts for the per-epoch comparison")
    ap.add_argument("--e2e-epochs", type=int, default=5, help="epochs measured per CUB end-to-end run")
    ap.add_argument("--e2e-repeats", type=int, default=1, help="rounds of the end-to-end rotation")
    ap.add_argument("--parallel-configs", default="demo,cub", help="datasets for the parallel-seeds table")
    ap.add_argument("--full", action="store_true", help="run both whole 100-epoch factorials for real")
    ap.add_argument("--epochs-only", action="store_true", help="stop after the per-epoch tables and breakdown")
    args = ap.parse_args(argv)
    thread_counts = [int(t) for t in args.threads.split(",")]
    print(
        f"# train_factorial  {time.strftime('%Y-%m-%d %H:%M')}  {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__}, load avg {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as tmp:
        root = Path(tmp)
        fs, fs_dir = prepare_dataset("cub", root)
        n_train = int((fs.split == 0).sum())
        print(
            f"CUB-sized synthetic: {n_train} train x {fs.dim}, batch 128, {n_train // 128} steps/epoch, 4 cells\n"
        )

        epoch_results = {}
        for threads in thread_counts:
            res = per_epoch(args, root, fs, fs_dir, threads)
            epoch_results[threads] = res
            gemm = res["GEMMs only (same shapes)"]
            ours = res["hierconsole batched"]
            print(
                f"## seconds per epoch, one seed's four cells, {threads} thread(s), median of {args.repeats}"
            )
            for name, secs in res.items():
                if name != "gemm_flops_per_epoch":
                    print(
                        f"  {name:<48} {secs:7.3f} s   {res['gemm_flops_per_epoch'] / secs / 1e9:6.1f} GFLOP/s"
                    )
            naive = res["naive (DataLoader, one cell at a time, geoopt)"]
            print(
                f"  naive / batched: {naive / ours:.2f}x;  per-cell / batched: "
                f"{res['hierconsole per-cell (reference)'] / ours:.2f}x"
            )
            target = GEMM_TARGETS.get(threads, GEMM_TARGETS[2])
            print(
                f"  GEMM-only time / batched epoch: {gemm / ours:.1%} of this machine's GEMM throughput at "
                f"these shapes  [target >= {target:.0%}: {verdict(gemm / ours >= target)}]"
            )
            train = np.flatnonzero(fs.split == 0)
            parts = step_breakdown(
                torch.from_numpy(fs.features[train]), torch.from_numpy(fs.labels[train]), hyper(1), threads
            )
            whole, gemm_step = parts.pop("whole step"), parts.pop("GEMMs alone")
            clock = "thread CPU time" if threads == 1 else "wall clock"
            print(
                f"  one batched step, median of 120, {threads} thread(s), {clock}: {whole:.2f} ms; "
                f"its GEMMs alone {gemm_step:.2f} ms = {gemm_step / whole:.1%} of the step"
            )
            for name, ms in parts.items():
                print(f"    {name:<30} {ms:6.2f} ms  {ms / whole:6.1%}")
            print()

        if args.epochs_only:
            return 0
        configs = [c for c in args.parallel_configs.split(",") if c]
        estimates = {}
        for name in configs:
            cfs, cdir = (fs, fs_dir) if name == "cub" else prepare_dataset(name, root)
            target = PRESET_EPOCHS[name]
            epochs = target if (args.full or name == "demo") else max(3, args.e2e_epochs)
            estimates[name] = est = e2e_estimates(root, cfs, cdir, name, epochs, target, args.e2e_repeats)
            print(
                f"## parallel seeds, {name}: 3 seed jobs as worker processes, {target} epochs "
                f"(checkpoint every epoch, validation every 10)"
            )
            for mode, _, _ in MODES:
                wall, total = est[mode]
                how = (
                    "measured"
                    if epochs == target
                    else f"{wall:.1f} s measured at {epochs} epochs, rest at measured pace"
                )
                print(f"  {mode:<20} {total:7.1f} s   ({how})")
            print()

        print("## whole 12-run factorial (3 seeds x 4 cells x 100 epochs), end to end")
        naive_name = "naive (DataLoader, one cell at a time, geoopt)"
        # The naive loop at its faster thread count: 2-thread runs on this machine stall sporadically,
        # and the comparison should not profit from that.
        best_threads = min(epoch_results, key=lambda t: epoch_results[t][naive_name])
        if "cub" not in estimates:
            estimates["cub"] = e2e_estimates(root, fs, fs_dir, "cub", max(3, args.e2e_epochs), 100, 1)
        if args.full:
            torch.set_num_threads(best_threads)
            naive_e2e = naive_full(fs)
            how = "measured"
        else:
            naive_e2e = 3 * 100 * epoch_results[best_threads][naive_name]
            how = "300 x its measured epoch"
        print(
            f"  naive, one process, {best_threads} thread(s) (its faster count): {naive_e2e:7.1f} s ({how})"
        )
        for mode, _, _ in MODES:
            ours_e2e = estimates["cub"][mode][1]
            ratio = naive_e2e / ours_e2e
            print(
                f"  hierconsole, {mode:<20} {ours_e2e:7.1f} s   speed-up {ratio:5.2f}x  "
                f"[target >= 4x: {verdict(ratio >= 4)}]"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
