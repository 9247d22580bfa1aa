"""A home copied or moved mid-study resumes where it is, never touching the original, and ends bit-identical."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess

import pytest

from hierconsole.engine.trainer import FAULT_ENV
from hierconsole.study.db.storage import Store
from hierconsole.study.run.orchestrator import Orchestrator
from tests.reliability.conftest import (
    TINY_RUN,
    cli,
    cli_argv,
    final_metrics,
    final_models,
    paused_at,
    tree_digest,
    wait_paused,
)
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # worker processes

ARGS = [*TINY_RUN, "--epochs", "4", "--seeds", "42"]


def _clean_result(tmp_path, tiny_fs):
    home = registered_home(tmp_path / "clean", tiny_fs)
    assert cli(home, *ARGS).returncode == 0
    return final_metrics(home), final_models(home)


def test_a_copied_and_a_moved_home_resume_on_their_own(tmp_path, tiny_home, tiny_fs):
    crashed = cli(tiny_home, *ARGS, env={**os.environ, FAULT_ENV: "3:1"})  # the worker dies in epoch 3
    assert crashed.returncode == 1 and "crashed" in crashed.stdout, crashed.stdout
    copy = tmp_path / "copy"
    shutil.copytree(tiny_home, copy)
    original = tree_digest(tiny_home)

    resumed = cli(copy, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert tree_digest(tiny_home) == original  # not one byte of the original changed
    expected = _clean_result(tmp_path, tiny_fs)
    assert (final_metrics(copy), final_models(copy)) == expected

    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    tiny_home.rename(moved)
    resumed = cli(moved, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (final_metrics(moved), final_models(moved)) == expected


def test_a_copy_never_adopts_the_originals_live_worker(tmp_path, tiny_home):
    """The original's orchestrator died and its worker still runs: the copy's resume must not take that
    worker (same PID, but it writes the original's folder) for its own."""
    holder = subprocess.Popen(cli_argv(tiny_home, *TINY_RUN, "--epochs", "4", "--seeds", "42"), env=paused_at(3),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    worker = None
    try:
        folder = wait_paused(tiny_home)  # the worker waits in epoch 3, after its first checkpoints
        assert any((folder / "checkpoints").glob("ckpt-*.pt"))
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        with Store(tiny_home, read_only=True) as store:
            worker = store.value("SELECT pid FROM jobs WHERE kind = 'final'")
        copy = tmp_path / "copy"
        shutil.copytree(tiny_home, copy, ignore=shutil.ignore_patterns("*.tmp*", ".*"))
        with Store(copy) as store:
            orchestrator = Orchestrator(store)  # settles the jobs an earlier orchestrator left running
            assert orchestrator.active == {}  # nothing adopted
            state, error = store.one("SELECT state, error FROM jobs WHERE kind = 'final'")
        assert state == "crashed" and "not for this job folder" in error
        os.kill(worker, 0)  # the original's worker was left alone
    finally:
        holder.kill()
        if worker:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)
