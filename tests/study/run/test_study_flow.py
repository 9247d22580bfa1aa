"""A study through the real orchestrator and worker processes: phases, seal, tuning, crash and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from hierconsole.contract.jobspec import JobSpec
from hierconsole.contract.liveness import pid_alive
from hierconsole.engine.trainer import FAULT_ENV
from hierconsole.engine.worker import SLOW_START_ENV
from hierconsole.errors import HierconsoleError, SealError
from hierconsole.locations import job_dir, resolve
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read.audits import CHECKS, stored_audits
from hierconsole.study.read.results import table_frame
from hierconsole.study.run.lifecycle import create_study, delete_study, lock_study, seal_for_scoring
from hierconsole.study.run.orchestrator import Orchestrator
from tests.homes import copy_home
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # worker processes


def _store_with_tiny(home, tiny_fs) -> Store:
    store = Store(home)
    register_dataset(store, tiny_fs)
    return store


def _cli(home, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory, trained_plain):
    """The session's plain trained study (tests/homes.py), this module's own copy."""
    return copy_home(trained_plain.home, tmp_path_factory.mktemp("home") / "home"), trained_plain.study_id


def test_study_runs_through_every_phase_and_passes_its_audits(finished_study):
    home, study_id = finished_study
    with Store(home) as store:
        study = get_study(store, study_id)
        assert study.phase == "complete"
        assert study.locked_at is not None and study.test_first_read_at >= study.locked_at
        states = store.rows(
            "SELECT kind, state, count(*) FROM jobs WHERE study_id = ? GROUP BY ALL ORDER BY 1", [study_id]
        )
        assert states == [("evaluate", "finished", 1), ("final", "finished", 2)]
        assert (
            store.one("SELECT count(*) FROM runs WHERE study_id = ? AND kind = 'final'", [study_id])[0] == 8
        )
        # 8 cells x 3 Q/G perturbations x 3 levels, registered aggregation only, nothing post hoc yet.
        per_cell = store.rows(
            "SELECT count(DISTINCT (run_id, perturbation, level)), count(DISTINCT aggregation), bool_or(posthoc) "
            "FROM metrics WHERE study_id = ? AND metric = 'mAP'",
            [study_id],
        )[0]
        assert per_cell == (72, 1, False)
        checks = stored_audits(store, study_id)
        assert len(checks) == len(CHECKS)
        assert all(c.ok for c in checks), [c for c in checks if not c.ok]
        # Valid-query counts are stored beside each Q/G split and agree with what evaluation counted.
        valid = json.loads(
            store.one("SELECT valid FROM splits WHERE study_id = ? AND role = 'qg:42'", [study_id])[0]
        )
        counted = dict(
            store.rows(
                "SELECT level, max(value) FROM metrics WHERE study_id = ? AND perturbation = 42 "
                "AND metric = 'valid_queries' GROUP BY level",
                [study_id],
            )
        )
        assert {k: int(v) for k, v in counted.items()} == valid


def test_replaying_every_event_changes_nothing(finished_study):
    home, study_id = finished_study
    tables = ("runs", "epochs", "val_metrics", "metrics", "events")
    with Store(home) as store:
        before = {t: store.frame(f"SELECT * FROM {t} ORDER BY ALL") for t in tables}
        orch = Orchestrator(store)
        for (job_id,) in store.rows("SELECT job_id FROM jobs"):
            assert orch.replay(job_id)[0]  # each job's whole events.jsonl, written again
        after = {t: store.frame(f"SELECT * FROM {t} ORDER BY ALL") for t in tables}
    for t in tables:
        assert before[t].equals(after[t]), t


def test_the_evaluate_job_scores_the_same_at_every_width(finished_study, tmp_path):
    # The finished study's own evaluate job, run again in this process with its units scored one at a
    # time and three at a time: every event equals the other width's and what the real job wrote.
    from dataclasses import replace

    from hierconsole.contract import events, layout
    from hierconsole.engine.evaluator import run_evaluation

    home, study_id = finished_study
    with Store(home) as store:
        (job_id,) = store.one("SELECT job_id FROM jobs WHERE study_id = ? AND kind = 'evaluate'", [study_id])
    folder = job_dir(home, job_id)
    spec = JobSpec.read(layout.spec_path(folder)).resolved(home)
    written = [
        e
        for e in events.read_events(folder / layout.EVENTS).events
        if isinstance(e, (events.TestMetrics, events.Norms))
    ]
    by_width = {}
    for workers in (1, 3):
        emitted: list = []
        out = tmp_path / f"width{workers}"
        run_evaluation(replace(spec, out_dir=str(out)), emitted.append, workers=workers)
        by_width[workers] = emitted
        for model in spec.models:  # the stored embeddings are the job's, byte for byte
            name = model.embeddings_name
            assert (out / layout.EMBEDDINGS / name).read_bytes() == (folder / layout.EMBEDDINGS / name).read_bytes()
    def exact(e: events.Event) -> tuple[str, str, str]:  # repr-exact floats, NaN kept; not the timestamp
        return str(e.KIND), e.key, json.dumps(e.fields(), allow_nan=True)

    for emitted in by_width.values():
        assert len(emitted) == len(written) == 8 * 3 + 4
        assert sorted(map(exact, emitted)) == sorted(map(exact, written))
    assert list(map(exact, by_width[1])) == list(map(exact, by_width[3]))  # and in the same order


def test_official_test_is_sealed_until_the_lock(tmp_path, tiny_fs):
    with _store_with_tiny(tmp_path, tiny_fs) as store:
        study_id = create_study(store, tiny_preset(), "tiny")
        with pytest.raises(SealError, match="not locked"):
            seal_for_scoring(store, study_id)
        with pytest.raises(SealError, match="cannot be locked"):
            lock_study(store, study_id)
        assert get_study(store, study_id).test_first_read_at is None
        # No job of the study was handed a test perturbation.
        for (job_id,) in store.rows("SELECT job_id FROM jobs WHERE study_id = ?", [study_id]):
            spec = JobSpec.read(job_dir(store.home, job_id) / "spec.json")
            assert not spec.test_splits


def test_temperature_tuning_uses_validation_only(tmp_path, tiny_fs):
    preset = tiny_preset(
        epochs=1,
        seeds=(42,),
        **{
            "temperature.euclidean": "tune",
            "temperature.poincare": "tune",
            "temperature.tuning.candidates": [0.1, 0.5],
            "temperature.tuning.epochs": 2,
        },
    )
    with _store_with_tiny(tmp_path, tiny_fs) as store:
        study_id = create_study(store, preset, "tiny")
        assert get_study(store, study_id).phase == "tuning"
        Orchestrator(store, max_parallel=2).run_until_idle()
        study = get_study(store, study_id)
        assert study.phase == "complete"
        table = table_frame(store, "tuning", study_id).sort(["geometry", "score"], descending=[False, True]).to_dicts()
        assert len(table) == 4
        for geometry in ("euclidean", "poincare"):
            rows = [r for r in table if r["geometry"] == geometry]
            assert [r["status"] for r in rows] == ["winner", "runner-up"]
            assert rows[0]["score"] == pytest.approx((rows[0]["middle_mAP"] + rows[0]["high_mAP"]) / 2)
            assert study.temperatures[geometry] == rows[0]["tau"]
            arm = "E_S" if geometry == "euclidean" else "H_S"
            assert (
                store.one(
                    "SELECT tau FROM runs WHERE study_id = ? AND kind = 'final' AND arm = ?", [study_id, arm]
                )[0]
                == rows[0]["tau"]
            )
        # Tuning jobs trained and scored on indices disjoint from the official test split.
        stored = store.one("SELECT path FROM splits WHERE study_id = ? AND role = 'protocol'", [study_id])[0]
        test = set(np.load(resolve(store.home, stored))["test"].tolist())
        for (job_id,) in store.rows(
            "SELECT job_id FROM jobs WHERE study_id = ? AND kind = 'tune'", [study_id]
        ):
            spec = JobSpec.read(job_dir(store.home, job_id) / "spec.json")
            assert spec.train_split and spec.val_split and not spec.test_splits
            for path in (spec.train_split, spec.val_split):
                with np.load(resolve(store.home, path)) as z:
                    assert all(test.isdisjoint(z[p].tolist()) for p in z.files)
        assert {c.name: c.ok for c in stored_audits(store, study_id)}["tuning_never_read_test"] is True


def _tick_until(orch, store, sql, params, done, timeout=120.0):
    deadline = time.monotonic() + timeout
    while True:
        orch.tick()
        row = store.one(sql, params)
        if done(row):
            return row
        assert time.monotonic() < deadline, f"timed out waiting; last row {row}"
        time.sleep(0.05)


def test_crashed_workers_are_detected_and_resume_to_the_same_result(tmp_path, tiny_fs, monkeypatch):
    home = tmp_path / "home"
    preset = tiny_preset(epochs=6, seeds=(42,))
    job_sql = "SELECT state, pid, epochs_done FROM jobs WHERE study_id = ? AND kind = 'final'"
    store = _store_with_tiny(home, tiny_fs)
    study_id = create_study(store, preset, "tiny")

    # 1. The worker dies under a running orchestrator (SIGKILL from outside, mid-epoch 3).
    monkeypatch.setenv(FAULT_ENV, "3:2")
    orch = Orchestrator(store, max_parallel=1)
    _tick_until(orch, store, job_sql, [study_id], lambda r: r[0] == "running")
    # While the run writes, a second writer is told who holds the store and what to do.
    busy = _cli(home, "resume")
    assert busy.returncode == 2
    assert f"PID {os.getpid()}" in busy.stderr and "--home" in busy.stderr
    row = _tick_until(orch, store, job_sql, [study_id], lambda r: r[0] != "running")
    assert row[0] == "crashed" and row[2] == 2
    assert (
        "status -9"
        in store.one("SELECT error FROM jobs WHERE study_id = ? AND kind = 'final'", [study_id])[0]
    )

    # 2. The orchestrator dies too: resumed, the worker is killed again while nobody watches.
    monkeypatch.setenv(FAULT_ENV, "5:1")
    orch.resume([f"{study_id}/final-s42"])
    _tick_until(orch, store, job_sql, [study_id], lambda r: r[0] == "running")
    pid = store.one(job_sql, [study_id])[1]
    while pid_alive(pid, None):
        time.sleep(0.05)
    store.close()  # no tick saw the death, no shutdown ran
    monkeypatch.delenv(FAULT_ENV)

    with Store(home) as store:
        assert store.one(job_sql, [study_id])[0] == "running"
        orch = Orchestrator(store, max_parallel=1)  # start-up finds the PID gone
        state, _, _ = store.one(job_sql, [study_id])
        assert state == "crashed"
        assert (
            "gone" in store.one("SELECT error FROM jobs WHERE study_id = ? AND kind = 'final'", [study_id])[0]
        )
        orch.resume([f"{study_id}/final-s42"])
        orch.run_until_idle()
        assert get_study(store, study_id).phase == "complete"
        resumed = dict(
            store.rows("SELECT arm, final_sha256 FROM runs WHERE study_id = ? AND kind = 'final'", [study_id])
        )
        assert (
            store.one("SELECT attempts FROM jobs WHERE study_id = ? AND kind = 'final'", [study_id])[0] == 3
        )
        # A run is a pure function of (dataset, preset, seed): an untouched study ends in the same states.
        clean_id = create_study(store, preset, "tiny")
        Orchestrator(store, max_parallel=1).run_until_idle()
        clean = dict(
            store.rows("SELECT arm, final_sha256 FROM runs WHERE study_id = ? AND kind = 'final'", [clean_id])
        )
    assert resumed == clean and len(clean) == 4


def test_a_frozen_worker_is_killed_and_marked_crashed(tmp_path, tiny_fs):
    with _store_with_tiny(tmp_path / "home", tiny_fs) as store:
        study_id = create_study(store, tiny_preset(epochs=40, seeds=(42,)), "tiny")
        orch = Orchestrator(store, max_parallel=1, stale_after=5.0)  # the worker beats every 2 s
        job_sql = "SELECT state, pid, epochs_done FROM jobs WHERE study_id = ? AND kind = 'final'"
        _tick_until(orch, store, job_sql, [study_id], lambda r: r[0] == "running" and r[2] >= 1)
        os.kill(store.one(job_sql, [study_id])[1], signal.SIGSTOP)  # alive, but beating no more
        row = _tick_until(orch, store, job_sql, [study_id], lambda r: r[0] != "running", timeout=30)
        assert row[0] == "crashed"
        error = store.one("SELECT error FROM jobs WHERE study_id = ? AND kind = 'final'", [study_id])[0]
        assert "no heartbeat" in error


def test_a_worker_that_never_beats_is_judged_from_its_launch(tmp_path, tiny_fs, monkeypatch):
    """Frozen before its first beat (a hung start): its launch starts the clock, as a beat would."""
    monkeypatch.setenv(SLOW_START_ENV, "600")  # started, and silent far past the limit
    with _store_with_tiny(tmp_path / "home", tiny_fs) as store:
        study_id = create_study(store, tiny_preset(epochs=2, seeds=(42,)), "tiny")
        orch = Orchestrator(store, max_parallel=1, stale_after=3.0, warm=False)
        job_sql = "SELECT state, error FROM jobs WHERE study_id = ? AND kind = 'final'"
        row = _tick_until(orch, store, job_sql, [study_id], lambda r: r[0] not in ("queued", "running"), timeout=60)
        assert row[0] == "crashed" and "no heartbeat" in row[1], row


def test_one_worker_per_gpu_each_sees_only_its_own(tmp_path, tiny_fs):
    with _store_with_tiny(tmp_path / "home", tiny_fs) as store:
        study_id = create_study(store, tiny_preset(epochs=1, seeds=(42, 2024, 3407)), "tiny")
        orch = Orchestrator(store, gpus=["3", "5"])
        seen: set[tuple[str, ...]] = set()
        while orch.busy([study_id]):
            orch.tick()
            seen.add(tuple(sorted(a.gpu for a in orch.active.values())))
            time.sleep(0.02)
        assert max(len(s) for s in seen) <= 2 and all(len(set(s)) == len(s) for s in seen)
        starts = [
            json.loads(p)["visible_devices"]
            for (p,) in store.rows(
                "SELECT payload FROM events WHERE kind = 'start' AND job_id LIKE ?", [f"{study_id}/final%"]
            )
        ]
        assert sorted(starts)[0] in ("3", "5") and set(starts) <= {"3", "5"} and len(starts) == 3
        # Without a visible GPU the workers fell back to the CPU and the study still completed.
        assert get_study(store, study_id).phase == "complete"


def test_deleting_a_study_removes_rows_and_artifacts(finished_study, tmp_path, tiny_fs):
    with _store_with_tiny(tmp_path / "home", tiny_fs) as store:
        keep = create_study(store, tiny_preset(epochs=1, seeds=(42,)), "tiny")
        Orchestrator(store).run_until_idle()
        gone = create_study(store, tiny_preset(epochs=1, seeds=(42,)), "tiny")
        with pytest.raises(HierconsoleError, match="cancel them first"):
            delete_study(store, gone)  # its job is still queued
        Orchestrator(store).run_until_idle()
        folder = store.home / "studies" / gone
        assert folder.exists()
        delete_study(store, gone)
        assert not folder.exists()
        for table in ("studies", "jobs", "runs", "metrics", "splits", "audits"):
            assert store.one(f"SELECT count(*) FROM {table} WHERE study_id = ?", [gone])[0] == 0
            assert store.one(f"SELECT count(*) FROM {table} WHERE study_id = ?", [keep])[0] > 0
        assert store.one("SELECT count(*) FROM events WHERE starts_with(job_id, ?)", [gone])[0] == 0


def test_a_worker_that_finishes_while_no_orchestrator_runs_is_settled_at_start(tmp_path, tiny_fs):
    home = tmp_path / "home"
    store = _store_with_tiny(home, tiny_fs)
    study_id = create_study(store, tiny_preset(epochs=3, seeds=(42,)), "tiny")
    orch = Orchestrator(store, max_parallel=1)
    job_sql = "SELECT state, pid FROM jobs WHERE study_id = ? AND kind = 'final'"
    _, pid = _tick_until(orch, store, job_sql, [study_id], lambda r: r[0] == "running")
    store.close()  # the console quits and leaves the worker running
    deadline = time.monotonic() + 120
    while pid_alive(pid, None):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with Store(home) as store:
        orch = Orchestrator(store, max_parallel=1)
        assert store.one(job_sql, [study_id])[0] == "finished"
        assert (
            store.one(
                "SELECT count(*) FROM epochs e JOIN runs r USING (run_id) WHERE r.study_id = ?", [study_id]
            )[0]
            == 12
        )  # every epoch event was ingested on the way
        assert get_study(store, study_id).phase == "evaluating"
        orch.run_until_idle()
        assert get_study(store, study_id).phase == "complete"
