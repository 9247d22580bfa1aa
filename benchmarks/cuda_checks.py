"""The checks of the CUDA path, as a plain script: no pytest, no test dependencies, tiny synthetic data.

    python benchmarks/cuda_checks.py --device cuda --out OUT     # on the GPU machine (gpu_check.sh)
    python benchmarks/cuda_checks.py --device cpu --out OUT      # the same checks on CPU (the test suite)

Each check prints one line, PASS, WARN (holds within a stated tolerance, not bit for bit) or FAIL with
what was measured, and goes to OUT/cuda_checks.json. Exit status 0 when none failed, 1 otherwise, 2
when the device is not available. What they check on the device:

- device_settings: deterministic algorithms, cuBLAS's fixed workspace, no TF32 (CUDA); recorded as such
- curvature_on_cpu: a Poincare head moved to the device keeps its curvature a CPU float64 scalar, and
  embeds and measures as on CPU
- retrieval_matches_cpu: the strict metrics computed on the device equal the CPU's, for three and for seven
  levels (the seven-level strict positives take the torch path on the device)
- dropout_streams: each cell's dropout masks come from its own generator on the device
- batched_matches_reference: the batched engine against the per-cell reference in float64
- stacked_matches_per_seed: seeds stacked in one computation against their per-seed jobs (bit for bit
  on CPU; on CUDA the largest difference is reported)
- same_run_twice: the same stacked training and evaluation twice give identical models and metrics
- resume_matches: a stacked worker process killed with SIGKILL and resumed ends bit for bit where the
  uninterrupted run ends
- no_sync_per_step: no device-to-host synchronisation inside a training step (only at epoch ends)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from hierconsole.config import Preset, load_preset
from hierconsole.contract import layout
from hierconsole.contract.jobspec import CellSpec, JobSpec, ModelRef, TestSplit
from hierconsole.datasets import SyntheticConfig, make_synthetic, qg_perturbations
from hierconsole.engine.batched import cell_noise
from hierconsole.engine.checkpoints import load_payload
from hierconsole.engine.determinism import CUBLAS_WORKSPACE, configure_device
from hierconsole.engine.evaluator import run_evaluation
from hierconsole.engine.geometry import EVAL_CLIP, Euclidean, Poincare
from hierconsole.engine.retrieval import evaluate
from hierconsole.engine.stacked import StackedTrainer
from hierconsole.engine.trainer import FAULT_ENV, CellRng, FactorialTrainer, resolve_device
from hierconsole.levels import Levels
from hierconsole.vocabulary import ARMS, JobKind

SMALL = SyntheticConfig(
    name="small", n_leaves=12, n_middles=6, n_highs=3, n_singleton_middles=2, n_train=260, n_test=160, dim=48
)
SEEDS = (42, 2024, 3407)
PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


class Warned(Exception):
    """The check holds within a tolerance only; the message says how close."""


def small_preset(device: str, epochs: int = 3) -> Preset:
    return load_preset("demo").with_overrides(
        epochs=epochs,
        seeds=list(SEEDS),
        device=device,
        values={
            "training.hidden": 32,
            "training.out_dim": 8,
            "training.batch_size": 32,
            "training.lr": 1e-3,
            "training.val_every": 2,
            "evaluation.n_query": 40,
            "evaluation.baselines": [],
        },
    )


class Study:
    """The small data, its split files and the final jobs of one study, under ``root``."""

    def __init__(self, root: Path, device: str):
        self.root, self.device = root, device
        self.fs = make_synthetic(SMALL)
        self.data = root / "data"
        if not self.data.exists():
            self.fs.save(self.data)
        train = np.flatnonzero(self.fs.split == 0)
        np.savez(root / "train.npz", fit=train)
        pool = np.random.default_rng(0).permutation(train)[:120]
        np.savez(root / "val.npz", query=np.sort(pool[:30]), gallery=np.sort(pool[30:]))
        test = np.flatnonzero(self.fs.split == 2)
        self.qg = []
        for split in qg_perturbations(self.fs.labels, test, n_query=40):
            path = root / f"qg-{split.params['seed']}.npz"
            np.savez(path, **split.parts)
            self.qg.append(TestSplit(split.params["seed"], str(path)))

    def finals(self, name: str, preset: Preset | None = None, **changes) -> list[JobSpec]:
        preset = preset or small_preset(self.device)
        specs = []
        for seed in preset.training.seeds:
            spec = JobSpec(
                job_id=f"{name}/final-s{seed}",
                study_id=name,
                kind=JobKind.FINAL,
                seed=seed,
                preset=preset,
                dataset_dir=str(self.data),
                out_dir=str(self.root / name / f"final-s{seed}"),
                cells=tuple(CellSpec.of(arm, 0.2) for arm in ARMS),
                train_split=str(self.root / "train.npz"),
                val_split=str(self.root / "val.npz"),
            )
            spec = replace(spec, **changes)
            spec.write(Path(spec.out_dir) / layout.SPEC)
            specs.append(spec)
        return specs

    def evaluation(self, finals: list[JobSpec]) -> JobSpec:
        first = finals[0]
        return JobSpec(
            job_id=f"{first.study_id}/evaluate",
            study_id=first.study_id,
            kind=JobKind.EVALUATE,
            seed=0,
            preset=first.preset,
            dataset_dir=str(self.data),
            out_dir=str(self.root / first.study_id / "evaluate"),
            test_splits=tuple(self.qg),
            models=tuple(
                ModelRef(f"{s.job_id}/{c.key}", s.seed, c, str(Path(s.out_dir) / layout.final_model(c)))
                for s in finals
                for c in s.cells
            ),
        )


def finals_of(specs: list[JobSpec]) -> dict[str, dict[str, torch.Tensor]]:
    return {
        f"{s.job_id}/{c.key}:{k}": v
        for s in specs
        for c in s.cells
        for k, v in load_payload(Path(s.out_dir) / layout.final_model(c))["model"].items()
    }


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> tuple[int, float]:
    """(tensors that differ in any bit, largest absolute difference)."""
    assert a.keys() == b.keys(), "different tensors"
    differing, largest = 0, 0.0
    for k in a:
        x, y = a[k].cpu(), b[k].cpu()
        if not torch.equal(x, y):
            differing += 1
            largest = max(largest, (x.double() - y.double()).abs().max().item())
    return differing, largest


# -- the checks -----------------------------------------------------------------------------------------
def check_device_settings(device: torch.device, study: Study) -> str:
    s = configure_device(device)
    if device.type == "cuda":
        assert torch.are_deterministic_algorithms_enabled(), "deterministic algorithms are off"
        assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") in (CUBLAS_WORKSPACE, ":16:8"), "no fixed cuBLAS workspace"
        assert torch.get_float32_matmul_precision() == "highest", "TF32 matmuls are allowed"
    return (
        f"{s.device_name}: deterministic {s.deterministic}, CUBLAS_WORKSPACE_CONFIG {s.cublas_workspace}, "
        f"float32 matmul {s.float32_matmul}, torch {s.torch_version}, CUDA {s.cuda_version}"
    )


def check_curvature_on_cpu(device: torch.device, study: Study) -> str:
    h = Poincare(c=2.0, r=0.4)
    t = torch.randn(50, 32, generator=torch.Generator().manual_seed(11))
    moved = torch.nn.Sequential(h).to(device)  # moving a parent must leave the curvature a CPU float64
    assert h.ball.c.device.type == "cpu" and h.ball.c.dtype == torch.float64, (h.ball.c.device, h.ball.c.dtype)
    z_cpu, z_dev = h.embed(t), moved[0].embed(t.to(device))
    torch.testing.assert_close(z_dev.cpu(), z_cpu, rtol=1e-5, atol=1e-6)
    worst = (z_dev.cpu() - z_cpu).abs().max().item()
    for geometry in (h, Euclidean()):
        a, b = geometry.embed(t), geometry.embed(t.flip(0))
        d_dev = geometry.pairwise(a.to(device), b.to(device), clip_max=EVAL_CLIP).cpu()
        d_cpu = geometry.pairwise(a, b, clip_max=EVAL_CLIP)
        torch.testing.assert_close(d_dev, d_cpu, rtol=1e-5, atol=1e-5)
        worst = max(worst, (d_dev - d_cpu).abs().max().item())
    return f"curvature stays a CPU float64; largest embedding/distance difference to CPU {worst:.2e}"


def check_retrieval_matches_cpu(device: torch.device, study: Study) -> str:
    rng = np.random.default_rng(60)

    def labels(n: int, k: int) -> np.ndarray:
        # a tree whose level l groups the leaves by 2^l (three levels: the leaf, pairs, sixes as before)
        leaf = rng.integers(0, 12 if k == 3 else 96, n)
        divisors = (1, 2, 6) if k == 3 else tuple(2**lvl for lvl in range(k))
        return np.stack([leaf // d for d in divisors], axis=1).astype(np.int64)

    geometry = Poincare(c=2.0, r=0.4)
    query = geometry.embed(torch.randn(40, 8, generator=torch.Generator().manual_seed(60)))
    gallery = geometry.embed(torch.randn(300, 8, generator=torch.Generator().manual_seed(61)))
    worst = 0.0
    for k in (3, 7):
        q_labels, g_labels = labels(40, k), labels(300, k)
        levels = Levels.default(k)
        cpu = evaluate(query, gallery, q_labels, g_labels, geometry, levels=levels)
        dev = evaluate(
            query.to(device), gallery.to(device), q_labels, g_labels, geometry, chunk_size=7, levels=levels
        )
        for level in levels.codes:
            assert np.array_equal(cpu.levels[level].query_index, dev.levels[level].query_index), (k, level)
            assert np.array_equal(cpu.levels[level].hits, dev.levels[level].hits), (k, level)
            np.testing.assert_allclose(cpu.levels[level].ap, dev.levels[level].ap, rtol=1e-6)
            worst = max(worst, float(np.abs(cpu.levels[level].ap - dev.levels[level].ap).max(initial=0.0)))
    return f"same valid queries and hits at every level of 3 and 7; largest AP difference {worst:.2e}"


def check_dropout_streams(device: torch.device, study: Study) -> str:
    def rngs(*seeds: int) -> list[CellRng]:
        return [CellRng(device, s) for s in seeds]

    both = cell_noise(rngs(1, 2), 64, 32, 0.1, torch.float32, device)
    alone = cell_noise(rngs(1), 64, 32, 0.1, torch.float32, device)
    assert both is not None and alone is not None
    assert torch.equal(both[:1], alone), "a cell's mask depends on the cell beside it"
    assert not torch.equal(both[0], both[1]), "two cells drew the same mask"
    kept = float((both != 0).float().mean())
    assert 0.8 < kept < 0.97, f"kept fraction {kept}"
    return f"each cell's mask from its own stream; kept fraction {kept:.3f} (p = 0.1)"


def check_batched_matches_reference(device: torch.device, study: Study) -> str:
    preset = small_preset(str(device), epochs=2)
    runs = {}
    for batched in (False, True):
        spec = study.finals(f"ref-{batched}", preset)[0]
        spec = replace(spec, batched=batched)
        FactorialTrainer(spec, lambda e: None, dtype=torch.float64).run()
        runs[batched] = finals_of([spec])
    ref = {k.split("/", 2)[-1]: v for k, v in runs[False].items()}
    bat = {k.split("/", 2)[-1]: v for k, v in runs[True].items()}
    _, worst = max_difference(ref, bat)
    assert worst <= 1e-9, f"largest difference {worst:.2e} > 1e-9"
    return f"float64, 2 epochs: largest parameter difference {worst:.2e} (tolerance 1e-9)"


def check_stacked_matches_per_seed(device: torch.device, study: Study) -> str:
    per_seed = study.finals("per-seed")
    for spec in per_seed:
        FactorialTrainer(spec, lambda e: None).run()
    stacked = study.finals("stacked")
    StackedTrainer(stacked, [lambda e: None] * len(stacked)).run()
    a = {k.split("/", 1)[1]: v for k, v in finals_of(per_seed).items()}
    b = {k.split("/", 1)[1]: v for k, v in finals_of(stacked).items()}
    differing, worst = max_difference(a, b)
    if differing == 0:
        return f"all {len(a)} final tensors of {len(SEEDS)} seeds bit for bit equal"
    message = f"{differing} of {len(a)} final tensors differ; largest difference {worst:.2e}"
    if device.type == "cpu" or worst > 1e-4:
        raise AssertionError(message)
    raise Warned(message + " (within 1e-4: stacking changes rounding on this device)")


def _stacked_run(study: Study, name: str) -> tuple[dict[str, torch.Tensor], list[dict]]:
    specs = study.finals(name)
    StackedTrainer(specs, [lambda e: None] * len(specs)).run()
    metrics: list[dict] = []
    run_evaluation(study.evaluation(specs), lambda e: metrics.append(e.fields()) if e.KIND == "metrics" else None)
    return finals_of(specs), metrics


def check_same_run_twice(device: torch.device, study: Study) -> str:
    (a, ma), (b, mb) = _stacked_run(study, "twice-a"), _stacked_run(study, "twice-b")
    a = {k.split("/", 1)[1]: v for k, v in a.items()}
    b = {k.split("/", 1)[1]: v for k, v in b.items()}
    differing, worst = max_difference(a, b)
    assert differing == 0, f"{differing} final tensors differ (largest {worst:.2e})"
    strip = [{k: v for k, v in m.items() if k != "run_id"} for m in ma]
    assert strip == [{k: v for k, v in m.items() if k != "run_id"} for m in mb], "test metrics differ"
    return f"{len(a)} final tensors and {len(ma)} test results identical"


def check_resume_matches(device: torch.device, study: Study) -> str:
    reference = study.finals("uninterrupted")
    StackedTrainer(reference, [lambda e: None] * len(reference)).run()
    specs = study.finals("resumed")
    paths = [str(Path(s.out_dir) / layout.SPEC) for s in specs]
    cmd = [sys.executable, "-m", "hierconsole.engine.worker", "--home", str(study.root), *paths]
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    killed = subprocess.run(cmd, env={**env, FAULT_ENV: "3:2"}, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, f"the faulted worker exited {killed.returncode}: {killed.stderr[-800:]}"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the resumed worker exited {done.returncode}: {done.stderr[-800:]}"
    log = [json.loads(line) for line in (Path(specs[0].out_dir) / layout.EVENTS).read_text().splitlines()]
    resumes = [e["epoch"] for e in log if e["kind"] == "resume"]
    assert resumes == [2], f"resumed at {resumes}"
    a = {k.split("/", 1)[1]: v for k, v in finals_of(reference).items()}
    b = {k.split("/", 1)[1]: v for k, v in finals_of(specs).items()}
    differing, worst = max_difference(a, b)
    assert differing == 0, f"{differing} final tensors differ from the uninterrupted run (largest {worst:.2e})"
    start = next(e for e in log if e["kind"] == "start")
    return (
        f"killed in epoch 3, resumed from epoch 2: all {len(a)} final tensors equal the uninterrupted run's; "
        f"start event: device {start['device']} ({start.get('device_name')}), deterministic {start.get('deterministic')}"
    )


def check_no_sync_per_step(device: torch.device, study: Study) -> str:
    """No device-to-host wait inside a training step: epoch ends (losses, checkpoints, validation) may sync.

    Every job asks ``should_stop`` once per batch, so the synchronisation warnings counted at those
    calls split the run into steps; a step that is not an epoch's last must add none.
    """
    if device.type != "cuda":
        return "not applicable on CPU (no device to wait for)"
    specs = study.finals("sync")
    per_epoch = len(np.load(specs[0].train_split)["fit"]) // specs[0].preset.training.batch_size
    marks: list[int] = []
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def probe() -> bool:
            marks.append(sum("synchroniz" in str(w.message).lower() for w in caught))
            return False

        torch.cuda.set_sync_debug_mode("warn")
        try:
            StackedTrainer(specs, [lambda e: None] * len(specs), probe).run()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    starts = marks[:: len(specs)]  # the count when each stacked step began
    inside = [starts[i + 1] - starts[i] for i in range(len(starts) - 1) if (i + 1) % per_epoch != 0]
    total = marks[-1] if marks else 0
    assert inside, "no step was observed"
    assert sum(inside) == 0, f"{sum(inside)} synchronisations inside {len(inside)} steps (one or more per step)"
    return (
        f"none inside {len(inside)} stacked steps of {len(specs)} seeds; {total} at epoch ends "
        "(losses, checkpoints, validation)"
    )


CHECKS: dict[str, Callable[[torch.device, Study], str]] = {
    "device_settings": check_device_settings,
    "curvature_on_cpu": check_curvature_on_cpu,
    "retrieval_matches_cpu": check_retrieval_matches_cpu,
    "dropout_streams": check_dropout_streams,
    "batched_matches_reference": check_batched_matches_reference,
    "stacked_matches_per_seed": check_stacked_matches_per_seed,
    "same_run_twice": check_same_run_twice,
    "resume_matches": check_resume_matches,
    "no_sync_per_step": check_no_sync_per_step,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", nargs="*", choices=sorted(CHECKS), help="run these checks only")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("cuda_checks: --device cuda, but torch sees no CUDA device; pass --device cpu", file=sys.stderr)
        return 2
    configure_device(device)  # before the first kernel
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="hc-cuda-checks-") as tmp:
        study = Study(Path(tmp), str(device))
        for name in args.only or CHECKS:
            t0 = time.perf_counter()
            try:
                status, detail = PASS, CHECKS[name](device, study)
            except Warned as exc:
                status, detail = WARN, str(exc)
            except Exception as exc:  # noqa: BLE001 - every check runs; a failure is recorded, not fatal
                status, detail = FAIL, f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
            seconds = time.perf_counter() - t0
            results.append({"check": name, "status": status, "detail": detail, "seconds": seconds})
            print(f"{status}  {name:<26} {seconds:6.1f} s  {detail}", flush=True)
    (args.out / "cuda_checks.json").write_text(json.dumps({"device": str(device), "checks": results}, indent=2))
    return 1 if any(r["status"] == FAIL for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
