"""Audit results as the front ends show them: recorded checks, or each check evaluated now on the evidence
the store holds (`audit_evidence`), in the one order every front end lists them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hierconsole.study.analysis.audits import baselines, fairness, protocol, seal, tuning
from hierconsole.study.analysis.audits.result import Check
from hierconsole.study.db.storage import Store
from hierconsole.study.read import audit_evidence as evidence

__all__ = ["CHECKS", "Check", "current_audits", "evaluate", "expected_counts", "failed_audit_counts", "realised_counts", "run_audits", "stored_audits"]

Audit = tuple[Callable[[Store, str], Any], Callable[[Any], Check]]
"""How one check reads its evidence, and the check."""

CHECKS: tuple[Audit, ...] = (
    (evidence.split_counts, protocol.expected_counts),
    (evidence.final_cells, fairness.trainable_parameters),
    (evidence.final_cells, fairness.same_init_within_seed),
    (evidence.final_epochs, fairness.same_batch_order),
    (evidence.final_cells_with_rows, fairness.update_budget),
    (evidence.final_cells, baselines.hier_authors_recipe),
    (evidence.final_cells, fairness.checkpoint_reload_exact),
    (evidence.final_cells, fairness.hyperbolic_norms_in_ball),
    (evidence.qg_scores, seal.qg_splits_identical),
    (evidence.test_reads, seal.test_read_after_lock),
    (evidence.test_isolation, seal.tuning_never_read_test),
    (evidence.final_jobs, fairness.fixed_thread_count),
    (evidence.shuffle_control, protocol.taxonomy_shuffle_development_only),
    (evidence.epoch_selection, seal.epoch_selected_on_validation),
    (evidence.pca_fit, baselines.pca_fitted_on_training_only),
    (evidence.final_cells, fairness.final_runs_complete),
    (evidence.candidates, tuning.tuning_same_init),
    (evidence.candidates, tuning.tuning_same_batch_order),
    (evidence.candidates, tuning.tuning_same_parameters),
    (evidence.tuning_reuse, tuning.tuning_checkpoints_not_reused),
    (evidence.from_scratch, tuning.finals_retrained_from_scratch),
    (evidence.lock_check, seal.lock_hash_matches),
)
"""Every check of a study, in the order they are listed (and recorded)."""


def evaluate(store: Store, study_id: str, check: Callable[[Any], Check]) -> Check:
    """One check of `CHECKS`, on the evidence the store holds now."""
    gather = next(g for g, c in CHECKS if c is check)
    return check(gather(store, study_id))


def run_audits(store: Store, study_id: str) -> list[Check]:
    """Every check of the study, computed from the stored evidence; nothing is written (the study records
    them with `run.lifecycle.record_audits`)."""
    return [check(gather(store, study_id)) for gather, check in CHECKS]


def expected_counts(store: Store, study_id: str) -> Check:
    """The `expected_counts` check alone: it needs no training, so a launch says it before any."""
    return evaluate(store, study_id, protocol.expected_counts)


def realised_counts(store: Store, study_id: str) -> dict[str, Any]:
    """The study's counts under the names of `[expected]`, from the splits and dataset recorded at creation."""
    return protocol.realised_counts(evidence.split_counts(store, study_id))


def stored_audits(store: Store, study_id: str) -> list[Check]:
    return [
        Check(name, ok, ev)
        for name, ok, ev in store.rows(
            "SELECT check_name, ok, evidence FROM audits WHERE study_id = ? ORDER BY check_name", [study_id]
        )
    ]


def current_audits(store: Store, study_id: str) -> tuple[list[Check], bool]:
    """The recorded checks of a study, or, before they are recorded, each check evaluated now.

    Returns (checks, recorded). Evaluating writes nothing: the record is the study's own, made when it
    completes (`hierconsole audit --recheck` refreshes it).
    """
    recorded = stored_audits(store, study_id)
    if recorded:
        return recorded, True
    return run_audits(store, study_id), False


def failed_audit_counts(store: Store) -> dict[str, int]:
    """study id -> number of recorded checks that failed (studies without failures are absent)."""
    return dict(
        store.rows("SELECT study_id, count(*) FROM audits WHERE ok = false GROUP BY study_id ORDER BY 1")
    )
