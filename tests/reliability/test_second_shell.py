"""A second shell while `hierconsole run` holds the store: reads work and show live progress, a second run
is told exactly what to do and disturbs nothing, and jobs whose orchestrator died are shown orphaned."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess

import pytest

from hierconsole.study.db.live import latest
from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, one_line_error, wait_for

pytestmark = pytest.mark.slow  # worker processes and the CLI in subprocesses


def _progress(runs_stdout: str) -> int:
    line = next(line for line in runs_stdout.splitlines() if "final-s42" in line)
    return int(re.search(r"(\d+)/2000", line).group(1))


def test_a_second_shell_watches_a_running_study(tiny_home):
    home = tiny_home
    holder = subprocess.Popen(
        cli_argv(home, *TINY_RUN, "--epochs", "2000", "--seeds", "42"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker_pid = None
    try:
        wait_for(lambda: latest(home) is not None, what="the holder's first live snapshot")
        runs = cli(home, "runs")
        assert runs.returncode == 0, runs.stderr
        assert "live snapshot of the store held by PID" in runs.stderr
        wait_for(lambda: _progress(cli(home, "runs").stdout) >= 1, what="ingested epochs in the snapshot")
        first = _progress(cli(home, "runs").stdout)
        line = next(line for line in cli(home, "runs").stdout.splitlines() if "final-s42" in line)
        assert "running" in line

        studies = cli(home, "studies")
        assert studies.returncode == 0 and "training" in studies.stdout
        audit = cli(home, "audit")
        assert audit.returncode in (0, 1) and "not saved" in audit.stderr
        export = cli(home, "export", "runs", "-o", "-", "--format", "csv")
        assert export.returncode == 0 and "final" in export.stdout
        # Each read names the snapshot it shows once, however many tables it prints (effects once said it
        # twice: it opened the store for the family check, the tables and the empty-level notes).
        with Store(home, read_only=True) as store:
            study = store.value("SELECT study_id FROM studies")
        for argv in (["runs"], ["studies"], ["audit"], ["effects", study], ["export", "runs", "-o", "-"]):
            assert cli(home, *argv).stderr.count("live snapshot of the store") == 1, argv

        # A second run: one line saying who holds the store and what to do; the holder runs on.
        text = one_line_error(cli(home, *TINY_RUN, "--epochs", "1"))
        assert f"PID {holder.pid}" in text and "--home" in text and "Read commands" in text
        assert holder.poll() is None

        # The snapshot is live: progress moves on while we watch.
        wait_for(lambda: _progress(cli(home, "runs").stdout) > first, what="progress in a later snapshot")

        # The orchestrator dies (its worker lives on): nobody ingests the job any more.
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        with Store(home, read_only=True) as store:
            worker_pid = store.value("SELECT pid FROM jobs WHERE kind = 'final'")
        runs = cli(home, "runs")
        assert runs.returncode == 0 and "live snapshot" not in runs.stderr
        line = next(line for line in runs.stdout.splitlines() if "final-s42" in line)
        assert "orphaned" in line and "running" not in line
    finally:
        holder.kill()
        if worker_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker_pid, signal.SIGKILL)
