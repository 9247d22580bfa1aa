"""A home on a disk too small for a backup: the run says, once, in its last lines that none was taken, and
`doctor` says it too (a 50 MB home once finished `replicate` with an empty backups folder, silently).
The disk is real: a small tmpfs mounted as the home (root only, as CI runs)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hierconsole.datasets import FeatureSet
from hierconsole.study.db import backups
from tests.reliability.conftest import TINY_RUN, cli
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # worker processes and the CLI in subprocesses

RUN = [*TINY_RUN, "--epochs", "2", "--seeds", "42"]
WARNING = "warning: the store's latest backup was not taken"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small disk needs root (CI runs as root)")
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)], capture_output=True, text=True)
    if mounted.returncode != 0:  # a container without the right to mount
        pytest.skip(f"cannot mount a small disk here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _doctor_line(home: Path, check: str) -> tuple[int, str]:
    done = cli(home, "--wide", "doctor")
    lines = [" ".join(line.split()) for line in done.stdout.splitlines() if check in line]
    assert lines, done.stdout + done.stderr
    return done.returncode, lines[0]


def test_a_backup_skipped_for_room_is_said_by_the_run_and_by_doctor(small_disk, tmp_path, tiny_fs: FeatureSet):
    home = registered_home(small_disk / "home", tiny_fs)
    done = cli(home, *RUN)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert said.count(WARNING) == 1 and "too little free space for a copy of the store" in said, done.stdout
    assert said.rindex(WARNING) > said.index("stored in") - 400  # among its last lines
    assert backups.listed(home) == []
    code, line = _doctor_line(home, "latest backup taken")
    assert code == 1 and "problem" in line and "too little free space" in line, line

    # On a disk with room, the next backup is taken and the note goes.
    roomy = tmp_path / "roomy"
    shutil.copytree(home, roomy)
    again = cli(roomy, *RUN)
    assert again.returncode == 0 and WARNING not in again.stdout, again.stdout + again.stderr
    assert backups.listed(roomy) and backups.skipped(roomy) is None
    code, line = _doctor_line(roomy, "latest backup taken")
    assert "ok" in line, line
