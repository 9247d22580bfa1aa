"""Studies launched from a notebook (`Home.run`): they finish with the CLI's numbers, the home stays
readable while they hold the store, and cancelling is the CLI's Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import signal

import pytest

import hierconsole as hc
from hierconsole.engine.trainer import PAUSE_ENV
from hierconsole.errors import INTERRUPTED_EXIT, HierconsoleError, StoreBusyError
from hierconsole.study.db.live import latest
from tests.notebook.cli_reference import assert_long_equals, cli, cli_json, effect_entries
from tests.reliability.conftest import unpause, wait_for, wait_paused
from tests.tiny import TINY_VALUES

pytestmark = pytest.mark.slow  # worker processes and the CLI in subprocesses

TINY_RUN = {"epochs": 2, "seeds": [42, 2024], "values": TINY_VALUES}


def _cli_flags() -> list[str]:
    flags = ["--epochs", "2", "--seeds", "42,2024"]
    for key, value in TINY_VALUES.items():
        flags += ["--set", f"{key}={json.dumps(value)}"]
    return flags


@contextlib.contextmanager
def _stopped_at_the_end(job):
    """Whatever a test asserts, no driver or worker outlives it."""
    try:
        yield job
    finally:
        if job.running:
            job.process.kill()
            job.process.wait(30)
            # Its workers live on without it: stop them too (their PIDs are in the store it left).
            from hierconsole.study.db.storage import Store

            with Store(job.home.path, read_only=True) as store:
                pids = [r[0] for r in store.rows("SELECT pid FROM jobs WHERE pid IS NOT NULL AND state = 'running'")]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_study_launched_from_a_notebook_ends_with_the_numbers_of_the_cli(tiny_home, tmp_path, tiny_fs):
    home = hc.open_home(tiny_home, writable=True)
    with _stopped_at_the_end(home.run("demo", **TINY_RUN)) as job:
        assert job.study_id in home.studies()["study_id"].to_list()
        assert job.wait(timeout=600) == 0, job.output()
    assert job.phase() == "complete"
    assert set(job.progress()["state"]) == {"finished"}
    assert home.audits(job.study_id)["ok"].all()

    doc = cli_json(tiny_home, "effects", job.study_id, "--json")
    assert_long_equals(home.effects(job.study_id), effect_entries(doc), ("group", "metric", "effect"))
    assert home.arms(job.study_id).to_dicts() == doc["arms"]

    # The same study run by `hierconsole run` in another home: bit-identical effects (a run is a pure
    # function of dataset, preset and seed), so launching from a notebook runs the very study the CLI runs.
    from hierconsole.study.db.catalog import register_dataset
    from hierconsole.study.db.storage import Store

    other = tmp_path / "other"
    with Store(other) as store:
        register_dataset(store, tiny_fs)
    done = cli(other, "run", "demo", *_cli_flags())
    assert done.returncode == 0, done.stdout + done.stderr
    by_cli = cli_json(other, "effects", "--json")
    assert by_cli["effects"] == doc["effects"] and by_cli["arms"] == doc["arms"]


def test_the_home_reads_while_a_launched_run_holds_it_and_cancel_stops_it(tiny_home, monkeypatch):
    monkeypatch.setenv(PAUSE_ENV, "3,6")  # the launched run's worker waits before epochs 3 and 6
    home = hc.open_home(tiny_home, writable=True)
    with _stopped_at_the_end(home.run("demo", **{**TINY_RUN, "epochs": 8, "seeds": [42]})) as job:
        wait_for(lambda: latest(tiny_home) is not None, timeout=120, what="the driver's first live snapshot")
        # The driver holds the writer lock: reads go through its live snapshot, the notebook's and the CLI's.
        assert job.running
        reader = hc.open_home(tiny_home)
        assert reader.studies()["study_id"].to_list() == [job.study_id]
        assert "live snapshot of the store held by PID" in (reader.source or "")
        folder = wait_paused(tiny_home, epoch=3)
        wait_for(lambda: job.progress()["done"].max() >= 1, timeout=120, what="epochs in the snapshot")
        first = job.progress()["done"].max()
        assert job.progress()["state"].to_list() == ["running"]
        assert cli(tiny_home, "runs").returncode == 0
        unpause(folder)
        wait_paused(tiny_home, epoch=6)
        wait_for(lambda: job.progress()["done"].max() > first, timeout=120, what="progress in a later snapshot")
        assert job.phase() == "training"

        # A second launch meets the held store: one clear error, and no study is added.
        with pytest.raises(StoreBusyError, match=f"PID {job.process.pid}"):
            home.run("demo", **TINY_RUN)
        assert reader.studies().height == 1

        code = job.cancel()
    assert code == INTERRUPTED_EXIT and not job.running  # the CLI's status for an interrupted run
    jobs = home.runs(job.study_id)
    assert jobs["state"].to_list() == ["cancelled"]
    assert "live snapshot" not in (home.source or "")


def test_bad_launch_options_are_refused_before_anything_is_created(tiny_home):
    home = hc.open_home(tiny_home, writable=True)
    with pytest.raises(HierconsoleError, match="unknown keyword lr"):
        home.run("demo", lr=1e-4)
    with pytest.raises(HierconsoleError, match="--parallel 0: give at least 1"):  # `run --parallel 0`'s line
        home.run("demo", parallel=0, **TINY_RUN)
    with pytest.raises(HierconsoleError, match="training.bogus"):
        home.run("demo", training__bogus=1, **TINY_RUN)
    with pytest.raises(HierconsoleError, match="no-such-preset. not found"):
        home.run("no-such-preset")
    assert home.studies().is_empty()
    family = tiny_home.parent / "fam.toml"
    family.write_text('[family]\nname = "f"\nbase = "demo"\n[members.a]\n[members.b]\n')
    with pytest.raises(HierconsoleError, match="is a family"):
        home.run(family)
    assert home.studies().is_empty()


def test_a_launched_run_drives_its_own_study_and_leaves_other_queued_work_alone(tiny_home):
    # Work a console left queued in the same home: `resume STUDY`, which drives the launched study, must
    # not start it (it is the other study's owner's to run).
    from hierconsole.study.db.storage import Store
    from hierconsole.study.run.lifecycle import create_study
    from tests.tiny import tiny_preset

    with Store(tiny_home) as store:
        left = create_study(store, tiny_preset(epochs=1, seeds=[7]), "tiny")
    home = hc.open_home(tiny_home, writable=True)
    with _stopped_at_the_end(home.run("demo", **{**TINY_RUN, "seeds": [42]})) as job:
        assert job.wait(timeout=600) == 0, job.output()
    assert set(home.runs(left)["state"]) == {"queued"}
    assert set(home.runs(job.study_id)["state"]) == {"finished"}


def test_a_device_this_machine_lacks_is_refused_before_anything_is_created(tiny_home):
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("MPS is present: device='mps' is not a bad value here")
    home = hc.open_home(tiny_home, writable=True)
    # The line `hierconsole run --device mps` refuses it with: one check, in the front door.
    with pytest.raises(HierconsoleError, match=r"--device = 'mps', but this machine's torch"):
        home.run("demo", **{**TINY_RUN, "device": "mps"})
    assert home.studies().is_empty()
