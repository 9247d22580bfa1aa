"""The console's read queries against hand-computed references on the fixed store."""

from __future__ import annotations

import statistics

import pytest

from hierconsole.study.db.storage import Store
from hierconsole.study.read import (
    active_jobs,
    current_audits,
    evaluated_per_seed,
    has_data,
    job_rows,
    job_threads,
    loss_curves,
    per_seed,
    resumable_jobs,
    stored_audits,
    taxonomy_lines,
    unfinished_studies,
)
from tests.stores.fixed import ARMS, COMPLETE, EPOCHS, LIVE, SEEDS, _loss


def test_job_rows_progress_losses_and_eta(open_store):
    rows = {r.job_id: r for r in job_rows(open_store, LIVE)}
    running = rows[f"{LIVE}/final-s2024"]
    assert (running.state, running.done, running.total) == ("running", 3, EPOCHS)
    assert running.losses == {arm: _loss(arm, 3, 2024) for arm in ARMS}
    # Remaining epochs times the mean stored epoch time (every fixture epoch took 1.5 s).
    assert running.eta_seconds == pytest.approx((EPOCHS - 3) * statistics.fmean([1.5] * 3))
    assert rows[f"{LIVE}/final-s3407"].resumable and rows[f"{LIVE}/final-s3407"].eta_seconds is None
    evaluation = next(r for r in job_rows(open_store, COMPLETE) if r.kind == "evaluate")
    assert (evaluation.done, evaluation.total) == (len(SEEDS) * len(ARMS) * 3, len(SEEDS) * len(ARMS) * 3)
    assert [r.seed for r in job_rows(open_store, COMPLETE)] == [*sorted(SEEDS), 0]


def test_one_studys_job_rows_are_its_rows_among_every_jobs(open_store):
    # The per-study read narrows each of its scans to the study; it must show what the store-wide read
    # shows for that study's jobs, scoring progress and latest losses included.
    everything = job_rows(open_store)
    assert {r.study_id for r in everything} == {COMPLETE, LIVE}
    for study in (COMPLETE, LIVE):
        assert job_rows(open_store, study) == [r for r in everything if r.study_id == study]
    evaluate = next(r for r in job_rows(open_store, COMPLETE) if r.kind == "evaluate")
    assert evaluate.done == evaluate.total == len(ARMS) * len(SEEDS) * len(SEEDS)
    assert job_rows(open_store, "no-such-study") == []


def test_what_resume_and_cancel_act_on(open_store):
    # The fixture: COMPLETE is done; LIVE has a finished, a running and a crashed final job.
    assert resumable_jobs(open_store) == [(f"{LIVE}/final-s3407", LIVE)]
    assert resumable_jobs(open_store, COMPLETE) == []
    assert active_jobs(open_store) == [(f"{LIVE}/final-s2024", LIVE)]
    assert active_jobs(open_store, LIVE) == active_jobs(open_store)
    assert active_jobs(open_store, COMPLETE) == []
    assert unfinished_studies(open_store) == [LIVE]
    assert unfinished_studies(open_store, COMPLETE) == []
    expected = max(int(r[0] or 1) for r in open_store.rows("SELECT threads FROM jobs")) or 1
    assert job_threads(open_store) == expected


def test_loss_curves_are_the_stored_epochs_in_arm_order(open_store):
    curves = loss_curves(open_store, f"{LIVE}/final-s2024")
    assert list(curves) == list(ARMS)
    assert curves["H_S"] == [(e, _loss("H_S", e, 2024)) for e in (1, 2, 3)]


def test_evaluated_per_seed_leaves_out_half_scored_seeds(fixed_copy):
    with Store(fixed_copy) as store:
        full = per_seed(store, COMPLETE)
        store.execute(
            "DELETE FROM metrics WHERE study_id = ? AND seed = 2024 AND arm = 'H_S' AND perturbation = 42",
            [COMPLETE],
        )
        partial = evaluated_per_seed(store, COMPLETE)
        assert sorted(set(partial["seed"].to_list())) == [42, 3407]
        assert partial.equals(full.filter(full["seed"] != 2024))
        store.execute("DELETE FROM metrics WHERE study_id = ?", [COMPLETE])
        assert evaluated_per_seed(store, COMPLETE) is None


def test_audits_are_the_record_once_it_exists(open_store):
    recorded, is_record = current_audits(open_store, COMPLETE)
    assert is_record and recorded == stored_audits(open_store, COMPLETE)
    live, is_record = current_audits(open_store, LIVE)
    assert not is_record and len(live) == len(recorded)
    assert not stored_audits(open_store, LIVE)  # evaluating them wrote nothing


def test_taxonomy_lines_match_the_imported_taxonomy(open_store, tiny_fs):
    assert taxonomy_lines(open_store, "tiny") == tiny_fs.taxonomy.summary().lines()


def test_an_empty_store_has_no_data(tmp_path):
    with Store(tmp_path) as store:
        assert not has_data(store)


def test_a_store_with_a_dataset_has_data(open_store):
    assert has_data(open_store)
