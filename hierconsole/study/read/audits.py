"""Audit results as the front ends show them: recorded checks, or each check evaluated now."""

from __future__ import annotations

from hierconsole.study.analysis.audits import CHECKS, Check, stored_audits
from hierconsole.study.db.storage import Store

__all__ = ["Check", "current_audits", "failed_audit_counts", "stored_audits"]


def current_audits(store: Store, study_id: str) -> tuple[list[Check], bool]:
    """The recorded checks of a study, or, before they are recorded, each check evaluated now.

    Returns (checks, recorded). Evaluating writes nothing: the record is the study's own, made when it
    completes (`hierconsole audit --recheck` refreshes it).
    """
    recorded = stored_audits(store, study_id)
    if recorded:
        return recorded, True
    return [check(store, study_id) for check in CHECKS], False


def failed_audit_counts(store: Store) -> dict[str, int]:
    """study id -> number of recorded checks that failed (studies without failures are absent)."""
    return dict(
        store.rows("SELECT study_id, count(*) FROM audits WHERE ok = false GROUP BY study_id ORDER BY 1")
    )
