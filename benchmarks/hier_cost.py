"""Cost of the HIER-style baseline cell against one factorial cell, on CUB-sized synthetic data.

    .venv/bin/python benchmarks/hier_cost.py                 # about 3 minutes on 2 shared cores
    .venv/bin/python benchmarks/hier_cost.py --epochs 3 --settings defaults,demo --loss-steps 3

CUB-sized data (5,994 x 768 train, 200 leaves), the cub preset (batch 128, 46 steps/epoch), one thread,
no validation. Times, per epoch (median over the epochs after the first), in the real trainer:

- one factorial cell: the four cells of a seed trained together by the batched engine, divided by four
  (what one cell costs inside a study), and E_S trained alone on the per-cell path;
- the HIER-style cell trained alone (per-cell path, as in a study: it is never stacked), with the HIER
  paper's defaults (512 hyperbolic proxies, 50 triplets per anchor, top-20 reciprocal neighbours) and with
  the settings the demo preset uses.

Prints each ratio hier / one factorial cell, wall and CPU, against issue 28's target of 10x at the paper's
defaults.

Then, in the same run, one step of the HIER objective alone (forward and backward; batch 128 x 32-D, 200
classes, the paper's defaults) with a breakdown: the materialising implementation of issue 12 (kept below
as ``old_term``, whole [triplets, proxies] tensors and torch's exponential_ noise) against the block-by-block
``triplet_ancestor_loss``; the new one split into its Gumbel noise, its forward pass and its backward pass;
the noise as issue 28's first version drew it (``previous_noise``: numpy float32 uniforms, two numpy logs)
against the stream's; and the floor: the noise alone and the raw random bits alone, per step, as multiples
of one batched cell's step (its epoch / its steps per epoch, measured above).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from factorial_setup import cells, prepare_dataset, write_job  # noqa: E402

from hierconsole.config import load_preset  # noqa: E402
from hierconsole.config.preset import HierConfig  # noqa: E402
from hierconsole.contract import events  # noqa: E402
from hierconsole.contract.jobspec import CellSpec  # noqa: E402
from hierconsole.engine.geometry import TRAIN_CLIP  # noqa: E402
from hierconsole.engine.hier_style import (  # noqa: E402
    ROW_BLOCK_ELEMENTS,
    GumbelStream,
    HierObjective,
    hier_ball,
    noise_seeds,
    reciprocal_triplets,
    triplet_ancestor_loss,
)
from hierconsole.engine.trainer import FactorialTrainer  # noqa: E402
from hierconsole.vocabulary import HIER_STYLE, HIER_STYLE_LOSS, POINCARE  # noqa: E402

HIER_CELL = CellSpec(HIER_STYLE, POINCARE, HIER_STYLE_LOSS)
TARGET = 10.0
STEPS_PER_EPOCH = 46
"""5,994 train rows in batches of 128 (the cub preset)."""


def old_term(dist, triplets, generator, tau, margin):
    """The HIER term as it was before issue 28: the noise drawn whole with torch's exponential_, every
    [triplets, proxies] intermediate materialised, autograd through all of them."""
    i, j, k = triplets
    n, p = i.numel(), dist.shape[1]
    g = [torch.empty((n, p)).exponential_(generator=generator).clamp_(min=1e-30).log_().neg_() for _ in range(2)]

    def straight(logits):
        soft = torch.softmax(logits, dim=-1)
        index = soft.argmax(dim=-1)
        hard = torch.zeros_like(soft).scatter_(-1, index.unsqueeze(-1), 1.0)
        return hard - soft.detach() + soft, index

    di, dj, dk = dist[i], dist[j], dist[k]
    far_ij = torch.maximum(di, dj)
    y_ij, idx_ij = straight(-far_ij / tau + g[0])
    y_ijk, idx_ijk = straight(-torch.maximum(dk, far_ij) / tau + g[1])
    loss = (
        F.relu((di * y_ij).sum(-1) - (di * y_ijk).sum(-1) + margin)
        + F.relu((dj * y_ij).sum(-1) - (dj * y_ijk).sum(-1) + margin)
        + F.relu((dk * y_ijk).sum(-1) - (dk * y_ij).sum(-1) + margin)
    )
    return (loss * (idx_ij != idx_ijk).float()).mean()


def previous_noise(rows: int, p: int, seeds: tuple[int, int]) -> list[np.ndarray]:
    """The Gumbel noise as the first block version drew it: numpy PCG64 float32 uniforms u, then
    -log(max(-log1p(-u), 1e-30)) with numpy's logs, for both choices."""
    out = []
    for seed in seeds:
        g = np.random.Generator(np.random.PCG64(seed)).random((rows, p), dtype=np.float32)
        np.negative(g, out=g)
        np.log1p(g, out=g)
        np.negative(g, out=g)
        np.maximum(g, np.float32(1e-30), out=g)
        np.log(g, out=g)
        np.negative(g, out=g)
        out.append(g)
    return out


def _timed(f, steps: int) -> tuple[float, object]:
    """Best of ``steps`` calls, in CPU seconds of this thread (the cores are shared: wall time swings with
    the other jobs' load, CPU time much less)."""
    best, out = float("inf"), None
    for _ in range(steps):
        t0 = time.thread_time()
        out = f()
        best = min(best, time.thread_time() - t0)
    return best, out


def loss_breakdown(steps: int, cell_step: float) -> None:
    """One objective step at the paper's defaults, old against new, with where the new one's time goes."""
    config = HierConfig()
    ball = hier_ball(config)
    obj = HierObjective(config, n_classes=200, dim=32, seed=42, ball=ball)
    g = torch.Generator().manual_seed(0)
    t = torch.randn(128, 32, generator=g).mul_(0.5).requires_grad_(True)
    leaf = torch.randint(0, 200, (128,), generator=g)
    b = t.shape[0]

    def inputs():
        z = ball.embed(t)
        dist = ball.pairwise(torch.cat([z, ball.embed(obj.hyperbolic_proxies)]), clip_max=TRAIN_CLIP)
        sim = torch.exp(-dist[:b, :b]).detach() + (leaf[None] == leaf[:, None]).float()
        parts = ((dist[:b, b:], sim), (dist[b:, b:], torch.exp(-dist[b:, b:]).detach()))
        return dist, parts

    def sample(parts):
        return [reciprocal_triplets(s, config.topk, config.triplets_per_anchor, obj.generator) for _, s in parts]

    _, parts = inputs()
    trips = sample(parts)
    fixed = [(d.detach(), tr) for (d, _), tr in zip(parts, trips, strict=True)]

    def term(backward: bool):
        for d, tr in fixed:
            x = d.clone().requires_grad_(backward)
            loss = triplet_ancestor_loss(x, tr, GumbelStream((3, 4), d.shape[1]), config.tau, config.margin)
            if backward:
                loss.backward()

    def new_step():
        _, parts = inputs()
        trips = sample(parts)
        loss = sum(
            triplet_ancestor_loss(d, tr, GumbelStream(noise_seeds(obj.generator), d.shape[1]), config.tau, config.margin)
            for (d, _), tr in zip(parts, trips, strict=True)
        )
        loss.backward()

    def old_step():
        _, parts = inputs()
        trips = sample(parts)
        loss = sum(old_term(d, tr, obj.generator, config.tau, config.margin) for (d, _), tr in zip(parts, trips, strict=True))
        loss.backward()

    def whole_objective():
        obj(ball.embed(t), leaf).backward()

    def stream_noise(rows_per_block: int):
        stream = GumbelStream((1, 2), config.proxies)
        for start in range(0, n_trip, rows_per_block):
            stream.log_uniforms(min(rows_per_block, n_trip - start))

    def raw_bits():
        streams = [np.random.PCG64(1), np.random.PCG64(2)]
        for s in streams:
            s.random_raw(n_trip * config.proxies // 2)

    n_trip = sum(tr[0].numel() for tr in trips)
    rows = ROW_BLOCK_ELEMENTS // config.proxies
    t_inputs, _ = _timed(inputs, steps)
    t_sample, _ = _timed(lambda: sample(parts), steps)
    t_noise, _ = _timed(lambda: stream_noise(rows), steps)
    t_bits, _ = _timed(raw_bits, steps)
    t_prev_noise, _ = _timed(lambda: previous_noise(n_trip, config.proxies, (1, 2)), steps)
    t_fwd, _ = _timed(lambda: term(False), steps)
    t_term, _ = _timed(lambda: term(True), steps)
    t_new, _ = _timed(new_step, steps)
    t_whole, _ = _timed(whole_objective, steps)
    t_old, _ = _timed(old_step, max(1, min(steps, 2)))
    print(
        f"HIER objective, one step at the paper's defaults ({n_trip:,} triplets x {config.proxies} proxies, "
        f"forward + backward, best of {steps}, CPU time of one thread):"
    )
    print(f"  old HIER term (materialising, issue 12):       {t_old * 1e3:8.1f} ms")
    print(f"  new step (distances, sampling, HIER term):     {t_new * 1e3:8.1f} ms  = {t_old / t_new:.1f}x faster")
    print(f"    distances, heads (forward only):             {t_inputs * 1e3:8.1f} ms")
    print(f"    reciprocal triplet sampling:                 {t_sample * 1e3:8.1f} ms")
    print(f"    HIER term, forward + backward:               {t_term * 1e3:8.1f} ms")
    print(f"      Gumbel noise (2 x {n_trip:,} x {config.proxies}):    {t_noise * 1e3:8.1f} ms"
          f"  (of it raw random bits {t_bits * 1e3:.1f} ms; the previous numpy noise {t_prev_noise * 1e3:.1f} ms)")
    print(f"      forward: gathers, maxima, races, argmins:  {(t_fwd - t_noise) * 1e3:8.1f} ms")
    print(f"      backward: softmaxes, maxima, scatters:     {(t_term - t_fwd) * 1e3:8.1f} ms")
    print(f"  whole objective (Proxy-Anchor + HIER term), new: {t_whole * 1e3:.1f} ms")
    print(
        f"  against one batched cell's step ({cell_step * 1e3:.2f} ms CPU, its epoch above / {STEPS_PER_EPOCH}): "
        f"the whole objective {t_whole / cell_step:.1f}x, the HIER term {t_term / cell_step:.1f}x, its noise "
        f"{t_noise / cell_step:.1f}x, the raw random bits {t_bits / cell_step:.1f}x (target <= {TARGET}x for the "
        "whole hier step)"
    )


def _demo_settings() -> dict[str, object]:
    """The [baselines.hier] values the demo preset sets (read from it, so this follows edits)."""
    hier = load_preset("demo").baselines.hier
    return {f"baselines.hier.{k}": getattr(hier, k) for k in ("proxies", "triplets_per_anchor", "topk")}


def epoch_seconds(spec) -> tuple[float, float]:
    """Median seconds per epoch after the first: (wall, as the trainer reports it; CPU of this process, which
    trains in-process on one thread, so the other jobs on shared cores inflate it much less)."""
    stamps: list[float] = []
    cpu: list[float] = [time.process_time()]
    n_cells = len(spec.cells)

    def emit(e: events.Event) -> None:
        if isinstance(e, events.Epoch):
            if len(stamps) % n_cells == 0:
                cpu.append(time.process_time())
            stamps.append(e.seconds)

    FactorialTrainer(spec, emit).run()
    per_epoch = stamps[::n_cells]  # every cell of an epoch reports the same seconds
    cpu_epoch = [b - a for a, b in zip(cpu, cpu[1:], strict=False)]
    return statistics.median(per_epoch[1:] or per_epoch), statistics.median(cpu_epoch[1:] or cpu_epoch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--settings", default="defaults,demo", help="comma list of: defaults, demo")
    ap.add_argument("--loss-steps", type=int, default=3, help="objective steps timed (0: skip the breakdown)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fs, fs_dir = prepare_dataset("cub", root)

        def job(name: str, cell_specs, batched: bool, values: dict | None = None):
            spec = write_job(root / name, fs, fs_dir, seed=42, epochs=args.epochs, threads=1, batched=batched, validate=False)
            preset = spec.preset.with_overrides(values=values) if values else spec.preset
            return replace(spec, cells=cell_specs, preset=preset)

        t0 = time.perf_counter()
        four, four_cpu = (x / 4 for x in epoch_seconds(job("four", cells(), True)))
        alone, alone_cpu = epoch_seconds(job("alone", (CellSpec.of("E_S", 0.2),), False))
        print(
            f"one factorial cell: {four:.3f} s/epoch wall, {four_cpu:.3f} CPU (a quarter of the four, batched); "
            f"E_S alone {alone:.3f} wall, {alone_cpu:.3f} CPU"
        )
        for name in args.settings.split(","):
            values = {} if name == "defaults" else _demo_settings()
            hier, hier_cpu = epoch_seconds(job(f"hier-{name}", (HIER_CELL,), False, values))
            shown = ", ".join(f"{k.rsplit('.', 1)[1]}={v}" for k, v in values.items()) or "HIER paper defaults"
            print(
                f"hier ({shown}): {hier:.3f} s/epoch wall = {hier / four:.1f}x one cell in the batched four "
                f"({hier / alone:.1f}x E_S alone); CPU {hier_cpu:.3f} s/epoch = {hier_cpu / four_cpu:.1f}x "
                f"({hier_cpu / alone_cpu:.1f}x E_S alone) (target <= {TARGET}x)"
            )
    if args.loss_steps:
        loss_breakdown(args.loss_steps, four_cpu / STEPS_PER_EPOCH)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"({time.perf_counter() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
