"""Workers train below the user's commands: a real `run`'s workers (cold and warm) have the orchestrator's
niceness plus WORKER_NICENESS, so a read typed beside a run is not queued behind training on a busy core."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hierconsole.contract.liveness import job_lock_holder
from hierconsole.study.executors.priority import WORKER_NICENESS
from tests.reliability.conftest import TINY_RUN, cli_argv, paused_at, wait_for
from tests.reliability.processes import standbys_of

pytestmark = pytest.mark.slow  # worker processes


def _niceness(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


def test_a_runs_workers_are_niced_below_its_orchestrator(tiny_home):
    run = subprocess.Popen(
        cli_argv(tiny_home, *TINY_RUN, "--epochs", "3", "--seeds", "42,2024"),
        env=paused_at(2),  # the workers wait in epoch 2 until the run is stopped
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        folders = lambda: [f for f in tiny_home.glob("studies/*/jobs/final-s*")]  # noqa: E731
        holders = lambda: [job_lock_holder(f) for f in folders()]  # noqa: E731
        wait_for(lambda: len(folders()) == 2 and all(holders()), timeout=120, what="both workers to run")
        expected = min(19, _niceness(run.pid) + WORKER_NICENESS)
        assert [_niceness(pid) for pid in holders() if pid is not None] == [expected, expected]
        assert _niceness(run.pid) == _niceness(0)  # the orchestrator itself keeps the shell's priority
    finally:
        run.terminate()
        run.wait(timeout=60)


def test_the_warm_standby_waits_at_the_workers_niceness(tiny_home):
    # One slot and two seeds: the second job waits, so the orchestrator starts a standby for it.
    before = set(standbys_of(tiny_home))
    run = subprocess.Popen(
        cli_argv(tiny_home, *TINY_RUN, "--epochs", "3", "--seeds", "42,2024", "--parallel", "1"),
        env=paused_at(2),  # the first job waits in epoch 2, so the second waits for its slot
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: bool(set(standbys_of(tiny_home)) - before), timeout=120, what="the standby to start")
        (standby,) = set(standbys_of(tiny_home)) - before
        # The orchestrator renices the standby just after starting it: /proc may show it a moment before.
        expected = min(19, _niceness(run.pid) + WORKER_NICENESS)
        wait_for(lambda: _niceness(standby) == expected, timeout=30, what=f"the standby at niceness {expected}")
    finally:
        run.terminate()
        run.wait(timeout=60)


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="the kernel has no scheduler autogroups")
def test_a_workers_session_is_niced_too(tiny_home):
    """Each worker leads a session of its own; with autogroups the scheduler shares the CPU between
    sessions before niceness counts, so the session's own niceness is what lets a shell's command first."""
    run = subprocess.Popen(
        cli_argv(tiny_home, *TINY_RUN, "--epochs", "3", "--seeds", "42"),
        env=paused_at(2),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        folder = lambda: next(iter(tiny_home.glob("studies/*/jobs/final-s42")), None)  # noqa: E731
        wait_for(lambda: folder() is not None and job_lock_holder(folder()) is not None, timeout=120, what="the worker")
        pid = job_lock_holder(folder())
        expected = str(min(19, _niceness(run.pid) + WORKER_NICENESS))
        group = lambda: Path(f"/proc/{pid}/autogroup").read_text().split()  # noqa: E731
        # The orchestrator renices the session just after the hand-off, as it does a cold worker's just after
        # its start: a forked worker, with no imports to wait for, may take its job's lock a moment before.
        wait_for(lambda: group()[-1] == expected, timeout=30, what=f"the worker's session at niceness {expected}")
    finally:
        run.terminate()
        run.wait(timeout=60)
