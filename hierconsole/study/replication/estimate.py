"""A replication's time left as the console shows it: the stages' counted work (recorded when the
replication was planned) priced by this machine's stored calibration and corrected by the stages that ran
(`costs`), and by the stages the home's other replications ran: what the console shows and
`replicate --dry-run` prints."""

from __future__ import annotations

from collections.abc import Iterable

from hierconsole.study.db.calibrations import calibration, replication_work
from hierconsole.study.db.replications import all_stage_rows, stage_rows
from hierconsole.study.db.storage import Store
from hierconsole.study.replication.costs import Estimate, StageWork, UnitCosts, estimate, predicted_seconds
from hierconsole.vocabulary import StageStatus

DONE = StageStatus.DONE
"""The stage state whose record means finished (the word `replicate` stores, from the vocabulary)."""


def replication_estimate(store: Store, replication_id: str, left: Iterable[str] | None = None) -> Estimate | None:
    """The estimate of the stages still to run, or None when the replication was never planned here or
    its calibration is missing.

    ``left`` names the stages still to run (the planner's decision); by default every stage without a
    finished record."""
    stored = replication_work(store, replication_id)
    if stored is None:
        return None
    key, raw = stored
    found = calibration(store, key)
    if found is None:
        return None
    work = {stage: StageWork.from_json(w) for stage, w in raw.items()}
    rows = stage_rows(store, replication_id)
    measured = {stage: row["seconds"] for stage, row in rows.items() if row["seconds"] is not None}
    if left is None:
        left = [stage for stage in work if rows.get(stage, {}).get("state") != DONE]
    units = UnitCosts.from_json(found["units"])
    return estimate(left, work, units, measured, home_history(store, replication_id, units))


def home_history(store: Store, replication_id: str, units: UnitCosts) -> list[tuple[str, float, float]]:
    """(stage, measured, predicted) of each finished stage of the home's other replications whose work was
    counted: what this machine did before corrects a replication none of whose stages has run yet."""
    history = []
    for rid, records in all_stage_rows(store).items():
        stored = replication_work(store, rid) if rid != replication_id else None
        work = stored[1] if stored is not None else {}
        for stage, row in records.items():
            if row["state"] == DONE and row["seconds"] is not None and stage in work:
                history.append((stage, float(row["seconds"]), predicted_seconds(StageWork.from_json(work[stage]), units)))
    return history


def calibrated_left(store: Store, replication_id: str) -> float | None:
    """Seconds left by the calibrated estimate, or None where the home holds none for this replication."""
    found = replication_estimate(store, replication_id)
    return found.total if found is not None else None
