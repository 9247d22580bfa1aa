"""An orchestrator killed between starting a worker and recording the launch (a kill of `run` or of
`replicate` can land there): the job is still queued in the store while its worker runs on. The next
orchestrator must neither lose what that worker wrote nor start the job twice.

Met by a user as a `replicate` killed during a factorial whose re-run ended with every metric equal but
table S12 different: the orphan's epochs were never ingested, so its audits failed."""

from __future__ import annotations

import os

import pytest

from hierconsole.contract.liveness import job_lock_held
from hierconsole.study.db.storage import Store
from hierconsole.study.run.orchestrator import LAUNCH_FAULT_ENV
from tests.reliability.conftest import TINY_RUN, cli, final_metrics, final_models, wait_for
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # worker processes

ARGS = [*TINY_RUN, "--epochs", "12", "--seeds", "42"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, tiny_fs):
    home = registered_home(tmp_path_factory.mktemp("clean") / "home", tiny_fs)
    done = cli(home, *ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    return final_metrics(home), final_models(home), _audits(home)


def _audits(home) -> list[tuple]:
    with Store(home, read_only=True) as store:
        return store.rows("SELECT check_name, ok FROM audits ORDER BY check_name")


def _killed_after_the_first_launch(home):
    """`run` dies right after it started its first worker; returns that job's folder (its worker lives)."""
    killed = cli(home, *ARGS, env={**os.environ, LAUNCH_FAULT_ENV: "1"})
    assert killed.returncode == -9, killed.stdout + killed.stderr
    with Store(home, read_only=True) as store:
        states = store.rows("SELECT DISTINCT state FROM jobs")
    assert states == [("queued",)]  # the launch was never recorded
    locked = lambda: [f for f in home.glob("studies/*/jobs/*") if (f / "job.lock").exists()]  # noqa: E731
    wait_for(lambda: bool(locked()), what="the orphaned worker to take its job's lock")
    (folder,) = locked()
    return folder


def test_an_unrecorded_worker_that_finished_is_ingested_not_lost(tmp_path, tiny_fs, clean):
    home = registered_home(tmp_path / "home", tiny_fs)
    folder = _killed_after_the_first_launch(home)
    wait_for(lambda: not job_lock_held(folder), timeout=120, what="the orphaned worker to finish")
    resumed = cli(home, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (final_metrics(home), final_models(home), _audits(home)) == clean
    assert all(ok for _, ok in _audits(home))


def test_an_unrecorded_worker_still_running_is_adopted_not_started_twice(tmp_path, tiny_fs, clean):
    home = registered_home(tmp_path / "home", tiny_fs)
    folder = _killed_after_the_first_launch(home)
    # Its lock names it as soon as it runs (before its imports): the resume below finds it alive.
    wait_for(lambda: (folder / "job.lock").read_text().strip().isdigit(), what="the worker's PID")
    resumed = cli(home, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (final_metrics(home), final_models(home), _audits(home)) == clean
    with Store(home, read_only=True) as store:
        starts = store.value(
            "SELECT count(*) FROM events WHERE kind = 'start' AND job_id LIKE ?", [f"%/{folder.name}"]
        )
    assert starts == 1  # one worker ran the job: the orphan, adopted
