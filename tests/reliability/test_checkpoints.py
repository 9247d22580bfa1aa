"""Checkpoint fallbacks are visible: each skipped file is named with its reason, and a restart from scratch
(no usable checkpoint) is a warning on the console a user reads, never silent."""

from __future__ import annotations

import hashlib
import os

import pytest

from hierconsole.engine.trainer import FAULT_ENV
from tests.reliability.conftest import TINY_RUN, cli, final_models
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # worker processes


def test_every_checkpoint_unusable_restarts_with_a_warning_and_the_same_result(tiny_home, tmp_path, tiny_fs):
    args = [*TINY_RUN, "--epochs", "4", "--seeds", "42"]
    crashed = cli(tiny_home, *args, env={**os.environ, FAULT_ENV: "3:1"})  # SIGKILL in epoch 3
    assert crashed.returncode == 1 and "crashed" in crashed.stdout, crashed.stdout + crashed.stderr
    (folder,) = tiny_home.glob("studies/*/jobs/final-s42/checkpoints")
    first, second = sorted(folder.glob("ckpt-*.pt"))
    first.write_bytes(first.read_bytes()[:100])  # torn: its SHA256 no longer matches
    garbage = os.urandom(2048)  # garbage whose sidecar hash matches: only unpickling can tell
    second.write_bytes(garbage)
    second.with_name(second.name + ".sha256").write_text(hashlib.sha256(garbage).hexdigest())

    resumed = cli(tiny_home, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    out = " ".join(resumed.stdout.split())
    assert f"skipped checkpoint {second.name}" in out and "not a readable checkpoint" in out
    assert f"skipped checkpoint {first.name}" in out and "does not match its recorded SHA256" in out
    assert "no usable checkpoint: training restarts from epoch 0" in out

    clean = registered_home(tmp_path / "clean", tiny_fs)
    assert cli(clean, *args).returncode == 0
    # The demo preset's cells and its HIER-style baseline, a cell of the same job: 5 final models.
    assert final_models(tiny_home) == final_models(clean) and len(final_models(clean)) == 5
