"""A power loss: the orchestrator and every worker killed at once (SIGKILL), and `resume` run minutes later.

The dead workers' heartbeat files stay in their job folders with the time of their last beat. The resumed
job's new worker must be judged by what it writes itself: judged by the old file, every job was killed
at once as "sent no heartbeat for 120 s", at every later `resume`, for good. The minutes are real file
times (the heartbeat files are dated back as the wait would leave them), not a wait in the test."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from hierconsole.contract import layout
from hierconsole.engine.worker import SLOW_START_ENV
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, final_metrics, final_models, wait_for
from tests.reliability.processes import alive, descendants
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # worker processes and the CLI in subprocesses

# Long enough (a few seconds a seed) that the kill lands mid-training, after a checkpoint.
ARGS = [*TINY_RUN, "--epochs", "120", "--seeds", "42,2024", "--set", "compute.max_parallel_jobs=2"]
WAITED = 130.0
"""Seconds between the power loss and the `resume`: past the orchestrator's 120 s heartbeat limit."""


def _checkpointed(home) -> bool:
    folders = list(home.glob("studies/*/jobs/final-s*"))
    return len(folders) == 2 and all(any((f / layout.CHECKPOINTS).glob("*.pt")) for f in folders)


def test_resume_after_a_power_loss_judges_the_new_workers_by_their_own_heartbeat(tmp_path, tiny_home, tiny_fs):
    home = tiny_home
    run = subprocess.Popen(cli_argv(home, *ARGS), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _checkpointed(home), timeout=120, what="a checkpoint of each seed")
        workers = descendants(run.pid)
        assert workers, "the run's workers"
        for pid in [run.pid, *workers]:  # all at once, as a power cut ends them
            os.kill(pid, signal.SIGKILL)
        run.wait(timeout=30)
        wait_for(lambda: not alive(workers), timeout=30, what="the workers to be gone")
    finally:
        run.kill()
    beats = sorted(home.glob(f"studies/*/jobs/*/{layout.HEARTBEAT}"))
    assert len(beats) == 2, beats
    then = time.time() - WAITED
    for beat in beats:
        os.utime(beat, (then, then))

    # The new workers take a second to start (as on a loaded machine), so that the orchestrator looks at
    # their folders before they first beat: the dead workers' heartbeat files are all it can see then.
    resumed = cli(home, "resume", env={**os.environ, SLOW_START_ENV: "1.5"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "heartbeat" not in resumed.stdout + resumed.stderr

    clean_home = registered_home(tmp_path / "clean", tiny_fs)
    clean = cli(clean_home, *ARGS)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert (final_metrics(home), final_models(home)) == (final_metrics(clean_home), final_models(clean_home))
    assert len(final_models(home)) == 10  # 2 seeds x (4 cells and the HIER-style baseline)
