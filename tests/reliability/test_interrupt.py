"""Ctrl-C in `hierconsole run`: the jobs are cancelled at a batch boundary (resumable), the command ends,
and `resume` finishes the study with every audit passing."""

from __future__ import annotations

import signal
import subprocess

import pytest

from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, wait_for

pytestmark = pytest.mark.slow  # worker processes and the CLI in a subprocess


def test_ctrl_c_cancels_and_resume_completes(tiny_home):
    run = subprocess.Popen(
        cli_argv(tiny_home, *TINY_RUN, "--epochs", "80", "--seeds", "42"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: any(tiny_home.glob("studies/*/jobs/final-s42/checkpoints/ckpt-*.pt")), what="a checkpoint")
        run.send_signal(signal.SIGINT)  # what the terminal sends on Ctrl-C
        out, _ = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 1 and "interrupted: cancelling jobs" in out
    with Store(tiny_home, read_only=True) as store:
        state, done = store.one("SELECT state, epochs_done FROM jobs WHERE kind = 'final'")
    assert state == "cancelled" and 0 < done < 80
    resumed = cli(tiny_home, "resume", timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "FAIL" not in resumed.stdout and "phase: complete" in " ".join(resumed.stdout.split())
