"""Every audit fails when its evidence is tampered with, naming the cell (or job) and the value.

The fabricated complete study (tests/stores/fixed.py) passes every check but `update_budget`, whose
failure is built in; each test below tampers with one piece of evidence in a copy of its store.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.contract.jobspec import JobSpec, TestSplit
from hierconsole.locations import job_dir, resolve
from hierconsole.study.db.storage import Store
from hierconsole.study.read import audits
from hierconsole.study.run.ingest import JobRef, apply_events
from hierconsole.study.run.rescoring import CHECK_NAME, reconcile
from hierconsole.vocabulary import JobKind
from tests.stores.fixed import COMPLETE, PARAMS


@pytest.fixture
def store(fixed_copy):
    with Store(fixed_copy) as s:
        yield s


def _check(store: Store, name: str) -> audits.Check:
    return next(c for c in audits.run_audits(store, COMPLETE) if c.name == name)


def _failed(store: Store, name: str, *expected: str) -> None:
    check = _check(store, name)
    assert check.ok is False, check
    for text in expected:
        assert text in check.evidence, (text, check.evidence)


def test_the_untampered_study_passes_every_check_but_the_built_in_failure(store):
    results = {c.name: c.ok for c in audits.run_audits(store, COMPLETE)}
    assert len(results) == len(audits.CHECKS)
    assert results.pop("update_budget") is False
    assert all(results.values()), results


def test_update_budget_names_the_cell_that_missed_it(store):
    _failed(store, "update_budget", "final-s2024/H_S made 39", "expected floor(260/32) x 5 = 40")


def test_a_different_parameter_count(store):
    store.execute(f"UPDATE runs SET trainable_params = 999 WHERE run_id = '{COMPLETE}/final-s42/H_R'")
    _failed(store, "trainable_parameters", "final-s42/H_R has 999", f"expected {PARAMS:,}")


def test_a_different_initial_state(store):
    store.execute(f"UPDATE runs SET init_sha256 = 'feedfacecafe0' WHERE run_id = '{COMPLETE}/final-s3407/E_S'")
    _failed(store, "same_init_within_seed", "seed 3407: final-s3407/E_S starts from feedfacecafe", "init-3407")


def test_a_different_batch_order_or_update_count(store):
    store.execute(
        f"UPDATE epochs SET batch_sha256 = 'shuffled-else' WHERE run_id = '{COMPLETE}/final-s42/H_S' AND epoch = 3"
    )
    _failed(store, "same_batch_order", "seed 42 epoch 3: final-s42/H_S batch order shuffled-els", "(42, 3)")
    store.execute(f"UPDATE epochs SET updates = 7 WHERE run_id = '{COMPLETE}/final-s2024/E_R' AND epoch = 2")
    _failed(store, "same_batch_order", "seed 2024 epoch 2: final-s2024/E_R update count 7")


def test_an_inexact_reload(store):
    store.execute(f"UPDATE runs SET reload_max_diff = 0.5 WHERE run_id = '{COMPLETE}/final-s42/H_S'")
    _failed(store, "checkpoint_reload_exact", "final-s42/H_S differs by 0.5")


def test_a_norm_outside_the_ball_or_beyond_its_bound(store):
    store.execute(f"UPDATE runs SET max_norm = 1.25 WHERE run_id = '{COMPLETE}/final-s3407/H_S'")
    _failed(store, "hyperbolic_norms_in_ball", "final-s3407/H_S max norm 1.250000 is not inside the ball")
    store.execute(f"UPDATE runs SET max_norm = 0.5 WHERE run_id = '{COMPLETE}/final-s3407/H_S'")
    _failed(store, "hyperbolic_norms_in_ball", "final-s3407/H_S max norm 0.500000 exceeds the analytic bound")


def test_a_cell_missing_a_query_gallery_split(store):
    store.execute(
        f"DELETE FROM metrics WHERE run_id = '{COMPLETE}/final-s42/E_R' AND perturbation = 2024"
    )
    _failed(store, "qg_splits_identical", "final-s42/E_R lacks Q/G perturbation(s) 2024", "[11, 12, 12]")


def test_a_test_read_before_the_lock(store):
    store.execute(
        "UPDATE studies SET test_first_read_at = TIMESTAMP '2027-01-15 10:01:30' WHERE study_id = ?", [COMPLETE]
    )
    _failed(store, "test_read_after_lock", "first read at 2027-01-15 10:01:30, before the lock at 2027-01-15 10:02:00")


def test_a_final_run_that_ended_after_the_lock(store):
    store.execute(
        "UPDATE jobs SET finished_at = TIMESTAMP '2027-01-15 10:05:00' WHERE job_id = ?", [f"{COMPLETE}/final-s2024"]
    )
    _failed(store, "test_read_after_lock", "final job final-s2024 finished at 2027-01-15 10:05:00, after the lock")


def test_a_training_job_handed_the_test(store):
    path = layout.spec_path(job_dir(store.home, f"{COMPLETE}/final-s42"))
    spec = JobSpec.read(path)
    qg = store.one("SELECT path FROM splits WHERE study_id = ? AND role = 'qg:42'", [COMPLETE])[0]
    replace(spec, test_splits=(TestSplit(42, qg),)).write(path)
    _failed(store, "tuning_never_read_test", "final-s42 was handed the official-test perturbation(s) 42")


def test_a_training_split_holding_test_samples(store):
    stored = store.one("SELECT path FROM splits WHERE study_id = ? AND role = 'final_train'", [COMPLETE])[0]
    protocol = store.one("SELECT path FROM splits WHERE study_id = ? AND role = 'protocol'", [COMPLETE])[0]
    test = np.load(resolve(store.home, protocol))["test"]
    fit = np.load(resolve(store.home, stored))["fit"]
    np.savez(resolve(store.home, stored), fit=np.concatenate([fit, test[:3]]))
    _failed(store, "tuning_never_read_test", "final-s42 train.fit holds 3 official-test indices")


def test_a_job_that_ran_with_another_thread_count(store):
    store.execute("UPDATE jobs SET threads = 2 WHERE job_id = ?", [f"{COMPLETE}/final-s3407"])
    _failed(store, "fixed_thread_count", "final-s3407 ran with 2 thread(s) on cpu, the others with 1 on cpu")


def _rescored(store: Store) -> list[ev.Event]:
    """A re-score under the registered aggregation that reproduces the stored endpoint exactly."""
    metrics: dict[tuple, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    keys = {}
    for run_id, seed, arm, pert, level, metric, value in store.rows(
        "SELECT run_id, seed, arm, perturbation, level, metric, value FROM metrics WHERE study_id = ?", [COMPLETE]
    ):
        metrics[(run_id, pert)][level][metric] = value
        keys[(run_id, pert)] = (seed, arm)
    return [
        ev.Reconcile(
            run_id=run_id,
            seed=keys[(run_id, pert)][0],
            arm=keys[(run_id, pert)][1],
            perturbation=pert,
            aggregation="micro",
            posthoc=False,
            metrics={level: dict(m) for level, m in by_level.items()},
            ts=1.0,
        )
        for (run_id, pert), by_level in metrics.items()
    ]


def test_a_rescore_that_does_not_reconcile(store):
    job = JobRef(f"{COMPLETE}/rescore-micro", COMPLETE, JobKind.RESCORE, 0)
    events = _rescored(store)
    store.write(lambda con: apply_events(con, job, events))
    assert reconcile(store, COMPLETE).ok  # the same numbers reconcile
    first = events[0]
    assert isinstance(first, ev.Reconcile)
    off = replace(first, metrics={**first.metrics, "high": {**first.metrics["high"], "mAP": 0.999}})
    store.write(lambda con: apply_events(con, job, [off]))
    report = reconcile(store, COMPLETE)
    assert not report.ok
    where = f"{first.run_id.split('/', 1)[1]} Q/G {first.perturbation} high mAP: re-scored 0.999"
    assert where in report.message and "FAIL" in report.message
    recorded = store.one("SELECT ok, evidence FROM audits WHERE study_id = ? AND check_name = ?", [COMPLETE, CHECK_NAME])
    assert recorded == (False, report.message)


def _record_device(store: Store, job: str, **settings) -> None:
    """Give a final job's start event the device settings a current worker records."""
    job_id = f"{COMPLETE}/{job}"
    payload = json.loads(store.one("SELECT payload FROM events WHERE job_id = ? AND kind = 'start'", [job_id])[0])
    payload.update(
        {
            "device_name": "NVIDIA H200",
            "deterministic": "strict",
            "cublas_workspace": ":4096:8",
            "float32_matmul": "highest",
            "torch_version": "2.11.0+cu128",
            **settings,
        }
    )
    store.execute(
        "UPDATE events SET payload = ? WHERE job_id = ? AND kind = 'start'", [json.dumps(payload), job_id]
    )


def test_the_device_and_determinism_settings_are_in_the_evidence(store):
    for job in ("final-s42", "final-s2024", "final-s3407"):
        _record_device(store, job)
    check = _check(store, "fixed_thread_count")
    assert check.ok is True, check
    assert (
        "device: NVIDIA H200, torch 2.11.0+cu128, deterministic algorithms strict, CUBLAS_WORKSPACE_CONFIG "
        ":4096:8, float32 matmul highest" in check.evidence
    )


def test_a_cuda_job_without_strict_determinism_fails(store):
    for job in ("final-s42", "final-s2024"):
        _record_device(store, job)
    _record_device(store, "final-s3407", deterministic="warn")
    _failed(
        store,
        "fixed_thread_count",
        "final-s3407 ran on NVIDIA H200, torch 2.11.0+cu128, deterministic algorithms warn",
        "final-s3407 ran on CUDA with deterministic algorithms warn, not strict",
    )
