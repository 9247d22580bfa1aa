"""The replication_stages table: each stage's last record, read and written through the Store.

Rows go in and out as plain values; the replication room turns them into its stage records (db sits below
it in the layers, so it does not know their type)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hierconsole.study.db.storage import Store


def stage_rows(store: Store, replication_id: str) -> dict[str, dict[str, Any]]:
    """stage -> {state, input_key, outputs, seconds} for one replication."""
    rows = store.rows(
        "SELECT stage, state, input_key, outputs, seconds FROM replication_stages "
        "WHERE replication_id = ? ORDER BY stage",
        [replication_id],
    )
    return {
        stage: {"state": state, "input_key": key, "outputs": json.loads(outputs), "seconds": seconds}
        for stage, state, key, outputs, seconds in rows
    }


def put_stage(
    store: Store,
    replication_id: str,
    stage: str,
    state: str,
    input_key: str,
    outputs: Mapping[str, str],
    seconds: float | None,
) -> None:
    store.execute(
        "INSERT OR REPLACE INTO replication_stages "
        "(replication_id, stage, state, input_key, outputs, seconds, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, current_timestamp)",
        [replication_id, stage, state, input_key, json.dumps(dict(sorted(outputs.items()))), seconds],
    )


def all_stage_rows(store: Store) -> dict[str, dict[str, dict[str, Any]]]:
    """replication -> stage -> {state, input_key, outputs, seconds, updated_at} for every replication in the
    store; `updated_at` in seconds since the Unix epoch (when a running stage started, or its last record)."""
    # The column holds local time (current_timestamp cast to TIMESTAMP); epoch() reads it as UTC, so the
    # session's offset is added back to give a true Unix time a reader can compare with its clock.
    rows = store.rows(
        "SELECT replication_id, stage, state, input_key, outputs, seconds, "
        "epoch(updated_at) + (epoch(current_timestamp) - epoch(current_timestamp::TIMESTAMP)) "
        "FROM replication_stages ORDER BY replication_id, stage"
    )
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for rid, stage, state, key, outputs, seconds, updated in rows:
        found.setdefault(rid, {})[stage] = {
            "state": state,
            "input_key": key,
            "outputs": json.loads(outputs),
            "seconds": seconds,
            "updated_at": float(updated),
        }
    return found
