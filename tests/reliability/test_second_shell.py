"""A second shell while `hierconsole run` holds the store: reads work and show live progress, a second run
is told exactly what to do and disturbs nothing, and jobs whose orchestrator died are shown orphaned."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess

import pytest

from hierconsole.study.db.live import latest
from hierconsole.study.db.storage import Store
from tests.reliability.conftest import (
    TINY_RUN,
    cli,
    cli_argv,
    one_line_error,
    paused_at,
    unpause,
    wait_for,
    wait_paused,
)
from tests.stores.fixed import COMPLETE, LIVE

pytestmark = pytest.mark.slow  # worker processes and the CLI in subprocesses


EPOCHS = 8
FIRST_PAUSE, SECOND_PAUSE = 3, 6  # the holder's worker waits before these epochs (the trainer's pause hook)


def _progress(runs_stdout: str) -> int:
    line = next(line for line in runs_stdout.splitlines() if "final-s42" in line)
    return int(re.search(rf"(\d+)/{EPOCHS}", line).group(1))


def test_a_second_shell_watches_a_running_study(tiny_home):
    home = tiny_home
    holder = subprocess.Popen(
        cli_argv(home, *TINY_RUN, "--epochs", str(EPOCHS), "--seeds", "42"),
        env=paused_at(FIRST_PAUSE, SECOND_PAUSE),
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
        folder = wait_paused(home, epoch=FIRST_PAUSE)
        first = FIRST_PAUSE - 1
        wait_for(lambda: _progress(cli(home, "runs").stdout) == first, what="ingested epochs in the snapshot")
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
        unpause(folder)
        wait_paused(home, epoch=SECOND_PAUSE)
        wait_for(
            lambda: _progress(cli(home, "runs").stdout) == SECOND_PAUSE - 1,
            what="progress in a later snapshot",
        )

        # The orchestrator dies (its worker, paused, lives on): nobody ingests the job any more.
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


def test_reads_during_a_run_return_the_stored_rows(fixed_copy):
    """`studies`, `runs`, `effects` and `contrast` in a second shell while a study runs: the complete
    study's numbers are those read when nothing runs, and the running study is there with its jobs."""
    home = fixed_copy
    reads = (["effects", COMPLETE, "--json"], ["contrast", COMPLETE, COMPLETE, "--json"])
    idle = {tuple(argv): cli(home, *argv) for argv in reads}
    for done in idle.values():
        assert done.returncode == 0, done.stderr
    holder = subprocess.Popen(
        cli_argv(home, *TINY_RUN, "--epochs", "3", "--seeds", "42"),
        env=paused_at(2),  # held mid-training until killed
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: latest(home) is not None, what="the holder's first live snapshot")
        with Store(home, read_only=True) as store:
            assert store.live
            new = store.value("SELECT study_id FROM studies WHERE study_id NOT IN (?, ?)", [COMPLETE, LIVE])
        for argv in reads:
            during = cli(home, *argv)
            assert during.returncode == 0 and "live snapshot" in during.stderr, during.stderr
            assert json.loads(during.stdout) == json.loads(idle[tuple(argv)].stdout), argv
        studies = cli(home, "studies")
        assert studies.returncode == 0 and "live snapshot" in studies.stderr
        assert all(sid in studies.stdout for sid in (COMPLETE, LIVE, new)), studies.stdout
        wait_for(lambda: "running" in cli(home, "runs", new).stdout, what="the new study's job running")
        runs = cli(home, "--wide", "runs", new)
        assert runs.returncode == 0 and "live snapshot" in runs.stderr, runs.stderr
        jobs = [line.split("│")[1].strip() for line in runs.stdout.splitlines() if "final-s" in line]
        assert jobs == [f"{new}/final-s42"] and "running" in runs.stdout, runs.stdout
    finally:
        holder.kill()
        holder.wait(timeout=30)
