"""This machine's unit costs for a replication's estimate: measured once by `hierconsole calibrate` in a
child process (this process never imports torch), stored in the store, and reused while what they depend
on is unchanged: the machine and its cores, Python, torch's version, the model and the plan's shapes and
threads. Any of those changed is another key, so it is measured again.

The child start-ups are measured here too: a light command (`hierconsole --version`) from start to exit,
and a worker's (a standby worker that imports the engine and, handed no job, exits), one on every core
at once as a study's parallel jobs start. Each is the faster of two runs: the first can read the
interpreter's files from a cold disk cache, which the stages' children, started after it, do not.
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

from hierconsole.contract.exit_status import EXIT_UNUSED
from hierconsole.errors import HierconsoleError
from hierconsole.orphans import die_with_parent
from hierconsole.study.analysis.stage_costs import UnitCosts
from hierconsole.study.db.calibrations import calibration, put_calibration
from hierconsole.study.executors.local import WORKER_MODULE
from hierconsole.study.run.replication import StoreOpener

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


def _child(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hierconsole", *argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - prctl only, no locks taken
        check=False,
    )


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


def _reported(argv: Sequence[str], done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    if done.returncode:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise HierconsoleError(f"replicate: the calibration (`hierconsole {' '.join(argv[:2])} ...`) failed: {tail[0]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(preset: str, overrides: Sequence[str], model: str, gallery: int, images: Sequence[Path]) -> UnitCosts:
    """Run the calibration: a light child's start-up (`hierconsole --version`) and a worker's, then
    `hierconsole calibrate` (a few seconds of measurements in a child that imports torch)."""
    argv = ["calibrate", preset, "--model", model, "--gallery", str(gallery)]
    for assignment in overrides:
        argv += ["--set", assignment]
    for image in images:
        argv += ["--image", str(image)]
    command_start = min(_started(["-m", "hierconsole", "--version"]) for _ in range(2))
    # A worker's start-up is a standby's: the interpreter and the engine's imports, then (stdin closed,
    # no job comes) its exit. Every core starts one at once, as a study's parallel jobs do.
    standby = ["-m", WORKER_MODULE, "--home", tempfile.gettempdir(), "--standby"]
    cores = os.cpu_count() or 1
    worker_start = min(_started(standby, copies=cores, exits=EXIT_UNUSED) for _ in range(2))
    measured = _reported(argv, _child(argv))
    return UnitCosts(
        command_start=command_start,
        worker_start=worker_start,
        cell_update=measured["cell_update"],
        comparison=measured["comparison"],
        image=measured["image"],
        backbone=measured["extractor_import"] + measured["backbone"],
        cores=measured["cores"],
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
