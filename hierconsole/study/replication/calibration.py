"""This machine's unit costs for a replication's estimate: measured once, in this process, where the home
holds none for what they depend on (the machine and its cores, Python, torch's version, the model and the
plan's shapes and threads), stored, and reused while those are unchanged.

A worker's start-up is measured by starting standby workers (one on every core at once, as a study's
parallel jobs start; the faster of two tries, the first may read a cold disk cache); the training step,
the retrieval and the backbone run here (torch is imported only when a calibration is measured).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from hierconsole.config.preset import Preset
from hierconsole.contract.exit_status import EXIT_UNUSED
from hierconsole.contract.standby import STANDBY_FLAG
from hierconsole.errors import HierconsoleError
from hierconsole.orphans import die_with_parent
from hierconsole.study.db.calibrations import calibration, put_calibration
from hierconsole.study.executors.local import WORKER_MODULE
from hierconsole.study.replication.costs import UnitCosts
from hierconsole.study.replication.runner import StoreOpener

CALIBRATION_IMAGES = 4
"""Images of the dataset the calibration runs the backbone on (after one warm-up image)."""


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def described(model: str, shape: Mapping[str, int]) -> dict[str, Any]:
    """What the unit costs depend on (the calibration's key is its hash)."""
    return {
        "machine": f"{platform.node()} {platform.machine()}",
        "cores": os.cpu_count() or 1,
        "python": platform.python_version(),
        "torch": _torch_version(),
        "model": model,
        "shape": dict(sorted(shape.items())),
    }


def calibration_key(description: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Calibrated:
    key: str
    units: UnitCosts
    measured_now: bool
    measured_at: Any = None


def _started(argv: Sequence[str], *, copies: int = 1, exits: int = 0) -> float:
    """Seconds from starting ``copies`` children ``python ARGV`` at once until the last one exits (each
    must exit with ``exits``)."""
    started = time.perf_counter()
    children = [
        subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - prctl only, no locks taken
        )
        for _ in range(copies)
    ]
    outcomes = [(child.communicate()[1], child.returncode) for child in children]
    seconds = time.perf_counter() - started
    for stderr, code in outcomes:
        if code != exits:
            raise HierconsoleError(
                f"replicate: `{' '.join(argv)}` failed in a child (exit {code}): "
                f"{(stderr.strip() or 'no output')[-200:]}"
            )
    return seconds


def measure(preset: Preset, model: str, gallery: int, images: Sequence[Path]) -> UnitCosts:
    """A worker's start-up, a few optimiser steps at the preset's shapes, a retrieval pass at ``gallery``
    items and the backbone on ``images``: a few seconds on a CPU."""
    standby = ["-m", WORKER_MODULE, "--home", tempfile.gettempdir(), STANDBY_FLAG]
    cores = os.cpu_count() or 1
    worker_start = min(_started(standby, copies=cores, exits=EXIT_UNUSED) for _ in range(2))
    import torch

    from hierconsole.engine.calibration import cell_update_seconds, comparison_seconds
    from hierconsole.extraction.architectures import ARCHITECTURES, config_file

    started = time.perf_counter()
    from hierconsole.extraction.calibration import extraction_seconds

    extractor = time.perf_counter() - started  # beyond a worker's imports: the extractor's (transformers)
    arch = ARCHITECTURES.get(model) or config_file(Path(model))
    default_threads = torch.get_num_threads()
    torch.set_num_threads(preset.compute.threads_per_worker)  # what each study worker runs with
    try:
        poincare = preset.geometry.poincare
        cell_update = cell_update_seconds(preset.cells, arch.dim, preset.training, poincare)
        comparison = comparison_seconds(max(1, gallery), preset.training.out_dim, poincare)
    finally:
        torch.set_num_threads(default_threads)  # `extract` runs on torch's default threads
    backbone, image = extraction_seconds(arch, images)
    return UnitCosts(
        command_start=0.0,  # the stages' commands run in this process: no child start-up
        worker_start=worker_start,
        cell_update=cell_update,
        comparison=comparison,
        image=image,
        backbone=extractor + backbone,
        cores=cores,
    )


def ensure_calibration(
    open_store: StoreOpener,
    description: Mapping[str, Any],
    run: Callable[[], UnitCosts],
) -> Calibrated:
    """The stored calibration of ``description``'s key, or a new one (``run()`` -> UnitCosts) stored."""
    key = calibration_key(description)
    with open_store() as store:
        found = calibration(store, key)
    if found is not None:
        return Calibrated(key, UnitCosts.from_json(found["units"]), False, found["measured_at"])
    units = run()
    with open_store() as store:
        put_calibration(store, key, description, units.to_json())
    return Calibrated(key, units, True)
