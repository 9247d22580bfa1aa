"""Workers and the GPU scripts run where only torch, numpy and geoopt are installed (tests/worker_only.py).

The GPU machine of benchmarks/gpu_check.sh has torch and numpy and takes geoopt (with scipy, which geoopt
imports) and hierconsole as carried wheels, without their other requirements: so a worker, and every
module it loads on the way to training and scoring (engine, contract, config, datasets), must never
import duckdb, polars, pyarrow, textual, platformdirs or anything else. These run real jobs and the real
scripts in an interpreter where every other installed package raises ModuleNotFoundError.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hierconsole.contract import layout
from hierconsole.contract.exit_status import EXIT_DONE
from tests.worker_only import blocked_modules, worker_only_env

from .conftest import make_spec

pytestmark = pytest.mark.slow  # interpreters in subprocesses

ROOT = Path(__file__).resolve().parents[2]
HEAVY_DEPENDENCIES = ("duckdb", "polars", "pyarrow", "textual", "rich", "platformdirs", "safetensors")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return worker_only_env(tmp_path_factory.mktemp("worker-only"))


def test_the_blocker_blocks_the_store_and_the_console(env):
    assert set(HEAVY_DEPENDENCIES) <= set(blocked_modules())
    done = subprocess.run(
        [sys.executable, "-c", "import duckdb"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "worker-only test" in done.stderr


def test_the_worker_modules_import_in_a_worker_only_interpreter(env):
    code = (
        "import sys\n"
        "import hierconsole.engine.worker, hierconsole.engine.trainer, hierconsole.engine.stacked\n"
        "import hierconsole.engine.evaluator, hierconsole.engine.baselines, hierconsole.engine.probe\n"
        "import hierconsole.contract.jobspec, hierconsole.config, hierconsole.datasets\n"
        f"print(sorted(m for m in {HEAVY_DEPENDENCIES!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_stacked_worker_trains_in_a_worker_only_interpreter(env, tmp_path, tiny_fs, tiny_dir):
    specs = [make_spec(tmp_path / f"s{seed}", tiny_fs, tiny_dir, seed=seed) for seed in (42, 2024)]
    specs = [replace(s, train_split=specs[0].train_split, val_split=specs[0].val_split) for s in specs]
    for s in specs:
        s.write(Path(s.out_dir) / "spec.json")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hierconsole.engine.worker",
            "--home",
            str(tmp_path),
            *(str(Path(s.out_dir) / "spec.json") for s in specs),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == EXIT_DONE, done.stderr + "".join(
        (Path(s.out_dir) / layout.ERROR).read_text() for s in specs if (Path(s.out_dir) / layout.ERROR).exists()
    )
    for s in specs:
        kinds = [json.loads(line)["kind"] for line in (Path(s.out_dir) / layout.EVENTS).read_text().splitlines()]
        assert kinds[0] == "start" and kinds[-1] == "done" and kinds.count("final") == 4


def _script(env, tmp_path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
    )


def test_the_gpu_benchmark_runs_in_a_worker_only_interpreter(env, tmp_path):
    # On CPU and small, the same code path as on the GPU: data, stacked training, evaluation, report.
    out = tmp_path / "out"
    done = _script(
        env,
        tmp_path,
        str(ROOT / "benchmarks" / "gpu_factorial.py"),
        *("--device", "cpu", "--dataset", "demo", "--epochs", "1", "--cpu-epochs", "0", "--out", str(out)),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((out / "gpu_factorial.json").read_text())
    assert result["audits_ok"] and result["runs"] == 12 and len(result["run"]["metrics"]) == 36
    assert result["gemm"]["seconds"] > 0 and result["target_met"] is False  # no claim for a CPU run
    assert "not applicable to this cpu run" in (out / "gpu_factorial.md").read_text()


def test_the_cuda_checks_script_runs_in_a_worker_only_interpreter(env, tmp_path):
    out = tmp_path / "out"
    checks = ("device_settings", "curvature_on_cpu", "dropout_streams", "stacked_matches_per_seed")
    done = _script(
        env,
        tmp_path,
        str(ROOT / "benchmarks" / "cuda_checks.py"),
        *("--device", "cpu", "--out", str(out), "--only", *checks),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((out / "cuda_checks.json").read_text())["checks"]
    assert [(r["check"], r["status"]) for r in results] == [(c, "PASS") for c in checks]
