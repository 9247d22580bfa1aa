"""Registering a family: one study per member of a family preset, all sharing the training seeds."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from hierconsole.config.family import Family
from hierconsole.study.db.catalog import ensure_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import sql_list
from hierconsole.study.run.drawn_splits import DrawnSplits
from hierconsole.study.run.lifecycle import create_study, delete_study, study_splits
from hierconsole.vocabulary import ACTIVE_STATES, JobState

if TYPE_CHECKING:
    import duckdb  # write callbacks are handed a connection by Store.write; only study.db opens one


def new_family_id(family: Family) -> str:
    return f"{family.name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def family_splits(store: Store, family: Family, dataset: str | None = None) -> list[DrawnSplits]:
    """Every member's splits, drawn and checked against its data; nothing written (but built-in synthetic
    data, registered on first use)."""
    return [
        study_splits(store, m.preset, ensure_dataset(store, dataset or m.preset.data.dataset))
        for m in family.members
    ]


def create_family(
    store: Store, family: Family, dataset: str | None = None, *, drawn: Sequence[DrawnSplits] | None = None
) -> tuple[str, list[str]]:
    """Register a family: one study per member (all sharing the training seeds), queued; returns the
    family id and the member studies in order. If a member cannot be created, none is kept. `drawn`:
    what `family_splits` drew for the same family and dataset."""
    datasets = [ensure_dataset(store, dataset or m.preset.data.dataset) for m in family.members]
    # Every member's splits are drawn (and their counts checked against the data) before any is created.
    if drawn is None:
        drawn = family_splits(store, family, dataset)
    created: list[str] = []
    try:
        for member, dataset_id, splits in zip(family.members, datasets, drawn, strict=True):
            created.append(create_study(store, member.preset, dataset_id, drawn=splits))
    except BaseException:
        for study_id in created:
            _discard(store, study_id)
        raise
    family_id = new_family_id(family)

    def insert(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(
            "INSERT INTO families (family_id, name, definition, sha256) VALUES (?, ?, ?, ?)",
            [family_id, family.name, json.dumps(family.definition(), default=str), family.sha256()],
        )
        con.executemany(
            "INSERT INTO family_members (family_id, member, position, study_id, overrides) VALUES (?, ?, ?, ?, ?)",
            [
                [family_id, m.name, i, study_id, json.dumps(m.overrides, default=str)]
                for i, (m, study_id) in enumerate(zip(family.members, created, strict=True))
            ],
        )

    store.write(insert)
    return family_id, created


def _discard(store: Store, study_id: str) -> None:
    """Remove a member study created moments ago whose jobs never started."""
    store.execute(
        f"UPDATE jobs SET state = ? WHERE study_id = ? AND state IN ({sql_list(ACTIVE_STATES)})",
        [JobState.CANCELLED, study_id],
    )
    delete_study(store, study_id)
