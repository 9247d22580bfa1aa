"""Cost of the HIER-style baseline cell against one factorial cell, on CUB-sized synthetic data.

    .venv/bin/python benchmarks/hier_cost.py                 # about 2 minutes on 2 shared cores
    .venv/bin/python benchmarks/hier_cost.py --epochs 3 --settings defaults,demo

CUB-sized data (5,994 x 768 train, 200 leaves), the cub preset (batch 128, 46 steps/epoch), one thread,
no validation. Times, per epoch (median over the epochs after the first), in the real trainer:

- one factorial cell: the four cells of a seed trained together by the batched engine, divided by four
  (what one cell costs inside a study), and E_S trained alone on the per-cell path;
- the HIER-style cell trained alone (per-cell path, as in a study: it is never stacked), with the HIER
  paper's defaults (512 hyperbolic proxies, 50 triplets per anchor, top-20 reciprocal neighbours) and with
  the settings the demo preset uses.

Prints each ratio hier / one factorial cell, against the issue's target of 1.5x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from factorial_setup import cells, prepare_dataset, write_job  # noqa: E402

from hierconsole.config import load_preset  # noqa: E402
from hierconsole.contract import events  # noqa: E402
from hierconsole.contract.jobspec import CellSpec  # noqa: E402
from hierconsole.engine.trainer import FactorialTrainer  # noqa: E402
from hierconsole.vocabulary import HIER_STYLE, HIER_STYLE_LOSS, POINCARE  # noqa: E402

HIER_CELL = CellSpec(HIER_STYLE, POINCARE, HIER_STYLE_LOSS)
TARGET = 1.5


def _demo_settings() -> dict[str, object]:
    """The [baselines.hier] values the demo preset sets (read from it, so this follows edits)."""
    hier = load_preset("demo").baselines.hier
    return {f"baselines.hier.{k}": getattr(hier, k) for k in ("proxies", "triplets_per_anchor", "topk")}


def epoch_seconds(spec) -> float:
    stamps: list[float] = []

    def emit(e: events.Event) -> None:
        if isinstance(e, events.Epoch):
            stamps.append(e.seconds)

    FactorialTrainer(spec, emit).run()
    n_cells = len(spec.cells)
    per_epoch = stamps[::n_cells]  # every cell of an epoch reports the same seconds
    return statistics.median(per_epoch[1:] or per_epoch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--settings", default="defaults,demo", help="comma list of: defaults, demo")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fs, fs_dir = prepare_dataset("cub", root)

        def job(name: str, cell_specs, batched: bool, values: dict | None = None):
            spec = write_job(root / name, fs, fs_dir, seed=42, epochs=args.epochs, threads=1, batched=batched, validate=False)
            preset = spec.preset.with_overrides(values=values) if values else spec.preset
            return replace(spec, cells=cell_specs, preset=preset)

        t0 = time.perf_counter()
        four = epoch_seconds(job("four", cells(), True)) / 4
        alone = epoch_seconds(job("alone", (CellSpec.of("E_S", 0.2),), False))
        print(f"one factorial cell: {four:.3f} s/epoch (a quarter of the four, batched); E_S alone {alone:.3f} s/epoch")
        for name in args.settings.split(","):
            values = {} if name == "defaults" else _demo_settings()
            hier = epoch_seconds(job(f"hier-{name}", (HIER_CELL,), False, values))
            shown = ", ".join(f"{k.rsplit('.', 1)[1]}={v}" for k, v in values.items()) or "HIER paper defaults"
            print(
                f"hier ({shown}): {hier:.3f} s/epoch = {hier / four:.1f}x one cell in the batched four, "
                f"{hier / alone:.1f}x E_S alone (target <= {TARGET}x)"
            )
        print(f"({time.perf_counter() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
