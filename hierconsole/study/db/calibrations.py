"""The calibrations and replication_work tables: `replicate`'s measured unit costs and each replication's
counted stage work, as plain JSON values (the cost model in `study.replication.costs` gives them their
types; db sits below it in the layers)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hierconsole.study.db.storage import Store


def calibration(store: Store, key: str) -> dict[str, Any] | None:
    """The unit costs stored under ``key`` (with ``described`` and ``measured_at``), or None."""
    rows = store.rows(
        "SELECT units, described, measured_at FROM calibrations WHERE calibration_key = ?", [key]
    )
    if not rows:
        return None
    units, described, measured_at = rows[0]
    return {"units": json.loads(units), "described": json.loads(described), "measured_at": measured_at}


def put_calibration(store: Store, key: str, described: Mapping[str, Any], units: Mapping[str, Any]) -> None:
    store.execute(
        "INSERT OR REPLACE INTO calibrations (calibration_key, described, units, measured_at) "
        "VALUES (?, ?, ?, current_timestamp)",
        [key, json.dumps(dict(described), sort_keys=True), json.dumps(dict(units), sort_keys=True)],
    )


def replication_work(store: Store, replication_id: str) -> tuple[str, dict[str, Any]] | None:
    """(calibration key, stage -> work) recorded for a replication, or None."""
    rows = store.rows(
        "SELECT calibration_key, work FROM replication_work WHERE replication_id = ?", [replication_id]
    )
    if not rows:
        return None
    key, work = rows[0]
    return key, json.loads(work)


def put_replication_work(store: Store, replication_id: str, key: str, work: Mapping[str, Any]) -> None:
    store.execute(
        "INSERT OR REPLACE INTO replication_work (replication_id, calibration_key, work, updated_at) "
        "VALUES (?, ?, ?, current_timestamp)",
        [replication_id, key, json.dumps(dict(work), sort_keys=True)],
    )
