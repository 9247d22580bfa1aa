"""Datasets, job specs and worker launches shared by the training benchmarks (not part of the package)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hierconsole.config import Preset, load_preset
from hierconsole.contract.jobspec import CellSpec, JobSpec
from hierconsole.datasets import CUB_SIZED_CONFIG, DEMO_CONFIG, FeatureSet, make_synthetic
from hierconsole.engine.worker import EXIT_DONE
from hierconsole.vocabulary import ARMS, JobKind

CONFIGS = {"demo": DEMO_CONFIG, "cub": CUB_SIZED_CONFIG}
SEEDS = (42, 2024, 3407)
TAU = 0.2  # CUB's temperature (cub.toml); the value does not change the cost


def prepare_dataset(name: str, root: Path) -> tuple[FeatureSet, Path]:
    fs = make_synthetic(CONFIGS[name])
    folder = root / f"data-{name}"
    if not folder.exists():
        fs.save(folder)
    return fs, folder


def cells() -> tuple[CellSpec, ...]:
    return tuple(CellSpec.of(arm, TAU) for arm in ARMS)


def hyper(epochs: int, *, threads: int = 1, device: str = "cpu", validate: bool = True) -> Preset:
    """The CUB preset (the protocol's optimiser, batch, clip, dropout and Poincaré operating point)."""
    return load_preset("cub").with_overrides(
        epochs=epochs,
        device=device,
        values={"compute.threads_per_worker": threads, "training.val_every": 10 if validate else 0},
    )


def write_job(
    folder: Path,
    fs: FeatureSet,
    fs_dir: Path,
    *,
    seed: int,
    epochs: int,
    threads: int,
    batched: bool = True,
    device: str = "cpu",
    validate: bool = True,
    checkpoint_every: int = 1,
) -> JobSpec:
    """A final-run job on the whole train split, validating every 10 epochs on a train-internal split."""
    folder.mkdir(parents=True, exist_ok=True)
    train = np.flatnonzero(fs.split == 0)
    np.savez(folder / "train.npz", fit=train)
    val_split = None
    if validate:
        pool = np.random.default_rng(seed).permutation(train)
        n_query = max(20, len(train) // 30)
        np.savez(
            folder / "val.npz", query=np.sort(pool[:n_query]), gallery=np.sort(pool[n_query : 6 * n_query])
        )
        val_split = str(folder / "val.npz")
    spec = JobSpec(
        job_id=f"bench/{folder.name}",
        study_id="bench",
        kind=JobKind.FINAL,
        seed=seed,
        preset=hyper(epochs, threads=threads, device=device, validate=validate),
        dataset_dir=str(fs_dir),
        out_dir=str(folder / "job"),
        cells=cells(),
        train_split=str(folder / "train.npz"),
        val_split=val_split,
        checkpoint_every=checkpoint_every,
        batched=batched,
    )
    spec.write(Path(spec.out_dir) / "spec.json")
    return spec


def run_workers(specs: list[JobSpec], parallel: int) -> float:
    """Run the jobs as worker processes, ``parallel`` at a time, as the orchestrator does; wall seconds."""
    pending = list(specs)
    running: list[tuple[subprocess.Popen, JobSpec]] = []
    t0 = time.perf_counter()
    while pending or running:
        while pending and len(running) < parallel:
            spec = pending.pop(0)
            env = dict(os.environ, OMP_NUM_THREADS=str(spec.threads))
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "hierconsole.engine.worker",
                    "--home",
                    spec.out_dir,
                    str(Path(spec.out_dir) / "spec.json"),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            running.append((proc, spec))
        time.sleep(0.02)
        for proc, spec in list(running):
            if proc.poll() is not None:
                running.remove((proc, spec))
                if proc.returncode != EXIT_DONE:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    error = Path(spec.out_dir) / "error.txt"
                    raise RuntimeError(
                        f"worker for {spec.job_id} exited {proc.returncode}: {err}"
                        f"{error.read_text() if error.exists() else ''}"
                    )
    return time.perf_counter() - t0


def epoch_intervals(spec: JobSpec) -> list[float]:
    """Seconds between a job's consecutive checkpoints: one whole epoch (training, validation, checkpoint)."""
    import json

    stamps = [
        e["ts"]
        for e in map(json.loads, (Path(spec.out_dir) / "events.jsonl").read_text().splitlines())
        if e["kind"] == "checkpoint"
    ]
    return [b - a for a, b in itertools.pairwise(stamps)]


def median(values: list[float]) -> float:
    return float(np.median(values))
