"""`hierconsole calibrate`: this machine's unit costs for `replicate`'s estimate, as one JSON line.

A few seconds on a CPU: torch's and the engine's import, a few optimiser steps of the batched factorial
at the preset's shapes, the strict retrieval of a few queries against the plan's gallery, and the
backbone built and run on a handful of the dataset's images. `replicate --dry-run` runs it as a child
(the light commands never import torch) and stores what it prints; torch is imported inside the command.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from hierconsole.config.files import load_preset
from hierconsole.config.overrides import parse_assignment
from hierconsole.present.json_output import json_text


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="measure this machine's unit costs for replicate's time estimate (prints JSON)",
        description="Time torch's import, a few training steps of the batched factorial at PRESET's shapes, "
        "a retrieval pass at --gallery items and the backbone on --image files; print them as one JSON "
        "line. `replicate --dry-run` runs this and stores the result.",
    )
    p.add_argument("preset", help="the preset whose shapes (batch, widths, cells, threads) are measured")
    p.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[])
    p.add_argument("--model", required=True, help="an architecture name or a .json of Dinov2Config fields")
    p.add_argument("--gallery", type=int, required=True, help="gallery items of one test perturbation")
    p.add_argument("--image", dest="images", type=Path, action="append", required=True, help="an image (repeat)")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from hierconsole.extraction.architectures import ARCHITECTURES, config_file

    preset = load_preset(args.preset).with_overrides(values=dict(parse_assignment(a) for a in args.overrides))
    arch = ARCHITECTURES.get(args.model) or config_file(Path(args.model))
    started = time.perf_counter()
    import torch

    from hierconsole.engine.calibration import cell_update_seconds, comparison_seconds

    imported = time.perf_counter() - started  # what a worker imports: torch and the engine, no more
    started = time.perf_counter()
    from hierconsole.extraction.calibration import extraction_seconds

    extractor = time.perf_counter() - started  # what `extract` imports beyond them (transformers)
    default_threads = torch.get_num_threads()
    torch.set_num_threads(preset.compute.threads_per_worker)  # what each study worker runs with
    poincare = preset.geometry.poincare
    cell_update = cell_update_seconds(preset.cells, arch.dim, preset.training, poincare)
    comparison = comparison_seconds(max(1, args.gallery), preset.training.out_dim, poincare)
    torch.set_num_threads(default_threads)  # `extract` runs on torch's default threads
    backbone, image = extraction_seconds(arch, args.images)
    doc = {
        "import": imported,
        "extractor_import": extractor,
        "cell_update": cell_update,
        "comparison": comparison,
        "backbone": backbone,
        "image": image,
        "cores": os.cpu_count() or 1,
        "threads": preset.compute.threads_per_worker,
        "torch": torch.__version__,
        "machine": f"{platform.node()} {platform.machine()}",
    }
    sys.stdout.write(json_text(doc, indent=None))
    return 0
