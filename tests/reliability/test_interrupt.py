"""Ctrl-C in `hierconsole run`: the jobs are cancelled at a batch boundary (resumable), the command ends
with 130 (a study and a family alike), and `resume` finishes the work with every audit passing."""

from __future__ import annotations

import signal
import subprocess

import pytest

from hierconsole.errors import INTERRUPTED_EXIT
from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, wait_for
from tests.stores.real import family_file

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
    assert run.returncode == INTERRUPTED_EXIT and "interrupted: cancelling jobs" in out
    with Store(tiny_home, read_only=True) as store:
        state, done = store.one("SELECT state, epochs_done FROM jobs WHERE kind = 'final'")
    assert state == "cancelled" and 0 < done < 80
    resumed = cli(tiny_home, "resume", timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "FAIL" not in resumed.stdout and "phase: complete" in " ".join(resumed.stdout.split())


def test_ctrl_c_in_a_family_run_exits_as_a_study_run_does(tiny_home, tmp_path):
    """As the probe met it: a family's run exited 1 on Ctrl-C where a study's exited cleanly."""
    members = {"flat": {"geometry.poincare.c": 0.5}, "curved": {"geometry.poincare.c": 2.0}}
    contrasts = [{"name": "curved - flat", "a": "curved", "b": "flat"}]
    values = {"training.epochs": 80, "training.seeds": [42], "compute.max_parallel_jobs": 1}
    path = family_file(tmp_path / "fam.toml", "interrupted", members, contrasts, values)
    run = subprocess.Popen(cli_argv(tiny_home, "run", str(path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: any(tiny_home.glob("studies/*/jobs/final-s42/checkpoints/ckpt-*.pt")), what="a checkpoint")
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == INTERRUPTED_EXIT, out + err
    assert "interrupted: cancelling jobs" in out and "Traceback" not in err
    with Store(tiny_home, read_only=True) as store:
        states = {s for (s,) in store.rows("SELECT state FROM jobs")}
    assert states <= {"cancelled", "queued", "finished"} and "cancelled" in states
