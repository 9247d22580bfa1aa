"""Backups: a consistent copy of the store at each study lock and every N minutes while it writes, the
newest K kept, each one a store that opens and reads."""

from __future__ import annotations

import os

import pytest

from hierconsole.study.db import backups
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import Phase
from tests.reliability.conftest import TINY_RUN, cli

pytestmark = pytest.mark.slow  # a study in a subprocess


def test_a_run_keeps_the_newest_backups_and_one_from_the_lock(tiny_home):
    env = {**os.environ, backups.ENV_MINUTES: "0.001", backups.ENV_KEEP: "3"}
    done = cli(tiny_home, *TINY_RUN, "--epochs", "2", "--seeds", "42", env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    kept = backups.listed(tiny_home)
    assert 1 <= len(kept) <= 3
    phases = []
    for copy in kept:
        with Store(tiny_home, path=copy, read_only=True) as store:
            assert store.verify_readable()["studies"] == 1
            phases.append(store.value("SELECT phase FROM studies"))
            locked = store.value("SELECT locked_at IS NOT NULL FROM studies")
            assert locked or phases[-1] not in (Phase.LOCKED, Phase.EVALUATING, Phase.COMPLETE)
    # The newest copies come from after the lock (it asked for one; the periodic ones follow it).
    assert phases[-1] in (Phase.LOCKED, Phase.EVALUATING, Phase.COMPLETE)


def test_without_periodic_copies_the_lock_still_leaves_one(tiny_home):
    env = {**os.environ, backups.ENV_MINUTES: "0", backups.ENV_KEEP: "5"}
    done = cli(tiny_home, *TINY_RUN, "--epochs", "2", "--seeds", "42", env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    (only,) = backups.listed(tiny_home)
    with Store(tiny_home, path=only, read_only=True) as store:
        assert store.value("SELECT phase FROM studies") == Phase.LOCKED
        assert store.value("SELECT lock_sha256 FROM studies") is not None


def test_a_bad_backup_setting_is_one_line(tiny_home):
    done = cli(tiny_home, "import", "synthetic", "demo", env={**os.environ, backups.ENV_KEEP: "none"})
    assert done.returncode == 2 and "HIERCONSOLE_BACKUP_KEEP" in done.stderr and "Traceback" not in done.stderr
