"""Jobs on Ray (`--executor ray`): the same results, events and recovery as local workers.

One local Ray instance (2 CPUs, no dashboard) serves the module; the CLI runs as a user runs it, a real
process pointed at that instance with `--ray-address`. Every job's worker runs in a scratch home on the
"node" (a temporary folder, never the home), so everything the orchestrator reads got home through Ray.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.contract.liveness import pid_alive
from hierconsole.errors import INTERRUPTED_EXIT
from hierconsole.study.db.storage import Store
from hierconsole.study.executors.ray_node import SCRATCH_ENV
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, final_metrics, final_models, wait_for
from tests.stores.real import registered_home

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # a local Ray instance and worker processes; Ray tests one at a time

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (pip install 'hierconsole[ray]'); the Ray executor's tests need it"
)

SEEDS = ("--seeds", "42,2024")


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Ray instance of this test process, shut down (with every worker of it) when the module ends."""
    saved = {k: os.environ.get(k) for k in ("RAY_DISABLE_USAGE_STATS", SCRATCH_ENV)}
    os.environ["RAY_DISABLE_USAGE_STATS"] = "1"
    # The nodes' scratch homes in a folder of their own, to show that each job's is removed.
    os.environ[SCRATCH_ENV] = str(tmp_path_factory.mktemp("ray-scratch"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _named_actors() -> list:
    from ray.util import list_named_actors

    return list_named_actors(all_namespaces=True)


def _scratch_left() -> list[Path]:
    root = Path(os.environ[SCRATCH_ENV]) / "hierconsole-ray"
    return [p for p in root.glob("*/*")] if root.is_dir() else []


def _job_folder(home: Path, name: str) -> Path:
    return next(home.glob(f"studies/*/jobs/{name}"))


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory: pytest.TempPathFactory, tiny_fs) -> Path:
    """The tiny study on local workers: what every Ray run must equal, bit for bit."""

    home = registered_home(tmp_path_factory.mktemp("local") / "home", tiny_fs)
    done = cli(home, *TINY_RUN, "--epochs", "3", *SEEDS, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return home


def test_a_study_on_ray_ends_bit_identical_to_local_workers(ray_address, tiny_home, local_reference):
    done = cli(tiny_home, *TINY_RUN, "--epochs", "3", *SEEDS, "--executor", "ray", "--ray-address", ray_address,
               timeout=600)  # fmt: skip
    out = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "phase: complete" in out and "FAIL" not in out and f"on the Ray cluster at {ray_address}" in out
    assert final_models(tiny_home) == final_models(local_reference)
    assert final_metrics(tiny_home) == final_metrics(local_reference)
    with Store(tiny_home, read_only=True) as store:
        where = store.rows("SELECT DISTINCT executor, state FROM jobs")
        events = store.value("SELECT count(*) FROM events")
        audits = store.rows("SELECT DISTINCT ok FROM audits")
    with Store(local_reference, read_only=True) as store:
        local_events = store.value("SELECT count(*) FROM events")
    assert where == [("ray", "finished")] and audits == [(True,)]
    # The same events, ingested from an events.jsonl the orchestrator wrote from what Ray brought home.
    assert events == local_events
    folder = _job_folder(tiny_home, "final-s42")
    kinds = [e.KIND for e in ev.read_events(folder / layout.EVENTS).events]
    assert kinds[0] == ev.EventKind.START and kinds[-1] == ev.EventKind.DONE
    assert sorted(p.name for p in (folder / layout.CHECKPOINTS).iterdir()) == sorted(
        p.name for p in (_job_folder(local_reference, "final-s42") / layout.CHECKPOINTS).iterdir()
    )
    runs = cli(tiny_home, "runs")
    assert "ray" in runs.stdout and runs.returncode == 0
    # Every job's actor and scratch home went once its last batch was home.
    wait_for(lambda: _named_actors() == [] and _scratch_left() == [], what="the actors to exit")


def test_a_killed_ray_worker_crashes_its_job_and_resume_ends_bit_identical(
    ray_address, tiny_home, tmp_path, tiny_fs
):

    epochs = ("--epochs", "150", "--seeds", "42")
    reference = registered_home(tmp_path / "reference", tiny_fs)
    assert cli(reference, *TINY_RUN, *epochs, timeout=600).returncode == 0

    run = subprocess.Popen(
        cli_argv(tiny_home, *TINY_RUN, *epochs, "--executor", "ray", "--ray-address", ray_address),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # A checkpoint in the *home* got there through Ray; executor.json names the Ray worker process.
        wait_for(lambda: any(tiny_home.glob("studies/*/jobs/final-s42/checkpoints/ckpt-*.pt")), timeout=300,
                 what="a checkpoint brought home")  # fmt: skip
        folder = _job_folder(tiny_home, "final-s42")
        info = json.loads((folder / layout.EXECUTOR).read_text())
        os.kill(info["pid"], signal.SIGKILL)  # the Ray worker process, mid-training
        out, err = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 1, out + err
    # The worker it ran dies with it: nothing trains on unobserved.
    wait_for(lambda: not pid_alive(info["worker_pid"], None), timeout=30, what="the worker to end")
    with Store(tiny_home, read_only=True) as store:
        state, done, error = store.one("SELECT state, epochs_done, error FROM jobs WHERE kind = 'final'")
    assert state == "crashed" and 0 < done < 150, (state, done, error)
    assert "Ray worker process" in error and "died" in error

    resumed = cli(tiny_home, "resume", "--executor", "ray", "--ray-address", ray_address, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "FAIL" not in resumed.stdout
    resumes = [e for e in ev.read_events(folder / layout.EVENTS).events if isinstance(e, ev.Resume)]
    assert resumes and resumes[-1].epoch > 0 and not resumes[-1].notes
    assert final_models(tiny_home) == final_models(reference)
    assert final_metrics(tiny_home) == final_metrics(reference)
    wait_for(lambda: _named_actors() == [], what="the actors to exit")


def test_cancel_stops_the_ray_job_and_a_local_resume_finishes_it(ray_address, tiny_home, tmp_path, tiny_fs):
    """Ctrl-C in `run` cancels the Ray jobs at a batch boundary; the home then holds all a local worker
    needs: `resume` on the local executor ends where an uninterrupted run does."""

    epochs = ("--epochs", "150", "--seeds", "2024")
    run = subprocess.Popen(
        cli_argv(tiny_home, *TINY_RUN, *epochs, "--executor", "ray", "--ray-address", ray_address),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: any(tiny_home.glob("studies/*/jobs/final-s2024/checkpoints/ckpt-*.pt")), timeout=300,
                 what="a checkpoint brought home")  # fmt: skip
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == INTERRUPTED_EXIT and "interrupted: cancelling jobs" in out, out + err
    with Store(tiny_home, read_only=True) as store:
        state, done = store.one("SELECT state, epochs_done FROM jobs WHERE kind = 'final'")
    assert state == "cancelled" and 0 < done < 150
    kinds = [e.KIND for e in ev.read_events(_job_folder(tiny_home, "final-s2024") / layout.EVENTS).events]
    assert kinds[-1] == ev.EventKind.CANCELLED  # the worker stopped itself: SIGTERM reached it through Ray
    wait_for(lambda: _named_actors() == [], what="the actors to exit")

    reference = registered_home(tmp_path / "reference", tiny_fs)
    assert cli(reference, *TINY_RUN, *epochs, timeout=600).returncode == 0
    resumed = cli(tiny_home, "resume", timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert final_models(tiny_home) == final_models(reference)
    assert final_metrics(tiny_home) == final_metrics(reference)


def test_a_new_orchestrator_re_attaches_to_a_running_ray_job(ray_address, tiny_home, local_reference):
    """An orchestrator that goes away leaves its Ray jobs running (as a console that quits and leaves them);
    the next one on the store finds them by name and ingests what they sent meanwhile, to the end."""
    from hierconsole.config import load_preset
    from hierconsole.study.executors.ray_cluster import RayExecutor
    from hierconsole.study.run.lifecycle import create_study
    from hierconsole.study.run.orchestrator import Orchestrator
    from tests.tiny import TINY_VALUES

    # As TINY_RUN runs it: with all three baseline arms.
    values = {**TINY_VALUES, "evaluation.baselines": ["frozen", "pca", "hier"]}
    preset = load_preset("demo").with_overrides(epochs=3, seeds=[42, 2024], values=values)
    with Store(tiny_home) as store:
        study_id = create_study(store, preset, "tiny")
        first = Orchestrator(store, executor=RayExecutor(store.home, ray_address), studies=[study_id])
        wait_for(lambda: (first.tick(), bool(first.active))[1], what="a Ray job to start")
        running = sorted(first.active)
        first.shutdown(cancel=False)  # leave them running; the shared Ray connection stays up
    with Store(tiny_home) as store:
        assert store.value("SELECT count(*) FROM jobs WHERE state = 'running'") == len(running)
        second = Orchestrator(store, connect_ray=lambda address: RayExecutor(store.home, address))
        assert sorted(second.active) == running  # adopted, not marked crashed
        second.executor = second.ray_executor(ray_address)
        second.run_until_idle([study_id], interval=0.1)
        assert store.rows("SELECT DISTINCT state, attempts FROM jobs") == [("finished", 1)]
    assert final_models(tiny_home) == final_models(local_reference)
    assert final_metrics(tiny_home) == final_metrics(local_reference)
    wait_for(lambda: _named_actors() == [], what="the actors to exit")
