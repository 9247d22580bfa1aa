"""Checkpoint fallbacks are visible: each skipped file is named with its reason, and a restart from scratch
(no usable checkpoint) is a warning on the console a user reads, never silent."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from hierconsole.engine.checkpoints import load_latest
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


WRITER = """
import sys
from pathlib import Path

import torch

from hierconsole.engine.checkpoints import save_checkpoint

folder, payload = Path(sys.argv[1]), {"w": torch.arange(50_000, dtype=torch.float32)}
for epoch in range(1, 1_000_000):
    save_checkpoint(folder, epoch, payload)
    if epoch == 2:
        print("saving", flush=True)
"""


TRIALS = 8
"""Kills per test, each 3 ms later into the write loop than the one before: about half of the loop is the
window between a checkpoint and its sidecar, so the old order failed within a few trials."""


def _killed_mid_loop(script: str, trial: int, *folders: Path) -> None:
    """Run `script` on `folders` until it has saved twice, then SIGKILL it ``trial`` x 3 ms later."""
    process = subprocess.Popen([sys.executable, "-c", script, *map(str, folders)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "saving\n"
        time.sleep(0.003 * trial)
    finally:
        process.kill()
        process.wait(timeout=30)


def test_a_kill_while_checkpointing_leaves_the_newest_checkpoint_verifiable(tmp_path):
    # A SIGKILL between a checkpoint's rename and its SHA256 sidecar's left a checkpoint without its hash:
    # resume skipped it as "a torn or altered write" (a full-suite failure of
    # tests/reliability/test_ray_executor.py's killed-worker test).
    for trial in range(TRIALS):
        folder = tmp_path / f"trial-{trial}"
        _killed_mid_loop(WRITER, trial, folder)
        latest, notes = load_latest(folder)
        assert notes == [] and latest is not None, (trial, notes)
        assert torch.equal(latest[1]["w"], torch.arange(50_000, dtype=torch.float32))


MIRROR = """
import sys
from pathlib import Path

import torch

from hierconsole.contract.transfer import changes, unpack
from hierconsole.engine.checkpoints import save_checkpoint

node, home = Path(sys.argv[1]), Path(sys.argv[2])
payload, known = {"w": torch.arange(50_000, dtype=torch.float32)}, {}
for epoch in range(1, 1_000_000):
    save_checkpoint(node, epoch, payload)
    copies, known = changes(node, known)
    unpack(home, copies)  # what the orchestrator does with a remote job's batch
    if epoch == 2:
        print("saving", flush=True)
"""


def test_a_kill_while_bringing_checkpoints_home_leaves_the_newest_verifiable(tmp_path):
    # The home's copy of a remote (Ray) job's folder was written in path order, each checkpoint before
    # its sidecar: an orchestrator killed between the two left a checkpoint without its hash at home.
    for trial in range(TRIALS):
        node, home = tmp_path / f"node-{trial}", tmp_path / f"home-{trial}"
        _killed_mid_loop(MIRROR, trial, node, home)
        latest, notes = load_latest(home)
        assert notes == [] and latest is not None, (trial, notes)
