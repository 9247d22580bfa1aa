"""Registering a family: one study per member of a family preset, all sharing the training seeds."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hierconsole.config.family import Family
from hierconsole.contract.durable import write_atomically
from hierconsole.errors import HierconsoleError
from hierconsole.locations import family_record
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import sql_list
from hierconsole.study.run.drawn_splits import DrawnSplits
from hierconsole.study.run.lifecycle import (
    check_record_columns,
    create_study,
    delete_study,
    read_record,
)
from hierconsole.vocabulary import ACTIVE_STATES, JobState

if TYPE_CHECKING:
    import duckdb  # write callbacks are handed a connection by Store.write; only study.db opens one


def new_family_id(family: Family) -> str:
    return f"{family.name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def create_family(
    store: Store, family: Family, datasets: Sequence[str], drawn: Sequence[DrawnSplits]
) -> tuple[str, list[str]]:
    """Register a family: one study per member (all sharing the training seeds), queued; returns the
    family id and the member studies in order. If a member cannot be created, none is kept. `datasets`
    and `drawn`: each member's dataset and its splits, drawn and checked before any is created
    (`commands.LaunchPlan`)."""
    created: list[str] = []
    try:
        for member, dataset_id, splits in zip(family.members, datasets, drawn, strict=True):
            created.append(create_study(store, member.preset, dataset_id, drawn=splits))
    except BaseException:
        for study_id in created:
            _discard(store, study_id)
        raise
    family_id = new_family_id(family)

    row = {
        "family_id": family_id,
        "name": family.name,
        "definition": json.dumps(family.definition(), default=str),
        "sha256": family.sha256(),
    }
    members = [
        [family_id, m.name, i, study_id, json.dumps(m.overrides, default=str)]
        for i, (m, study_id) in enumerate(zip(family.members, created, strict=True))
    ]

    def insert(con: duckdb.DuckDBPyConnection) -> None:
        _insert_family_rows(con, row, members)
        # Written inside the transaction, as a study's record is: committed rows always have their record.
        created_at = con.execute("SELECT created_at FROM families WHERE family_id = ?", [family_id]).fetchone()
        assert created_at is not None  # inserted just above
        record = {"format": FAMILY_RECORD_FORMAT, "family": {**row, "created_at": created_at[0].isoformat()}}
        write_atomically(family_record(store.home, family_id), json.dumps({**record, "members": members}).encode())

    try:
        store.write(insert)
    except BaseException:
        family_record(store.home, family_id).unlink(missing_ok=True)
        raise
    return family_id, created


FAMILY_RECORD_FORMAT = 1
"""The format of a family's record (`locations.family_record`)."""
FAMILY_RECORD_COLUMNS = frozenset({"family_id", "name", "definition", "sha256", "created_at"})


def _insert_family_rows(con: duckdb.DuckDBPyConnection, family: dict[str, Any], members: list[list[Any]]) -> None:
    check_record_columns(family, FAMILY_RECORD_COLUMNS, "family")
    con.execute(
        f"INSERT INTO families ({', '.join(family)}) VALUES ({', '.join('?' * len(family))})", list(family.values())
    )
    con.executemany(
        "INSERT INTO family_members (family_id, member, position, study_id, overrides) VALUES (?, ?, ?, ?, ?)",
        members,
    )


def recorded_families(store: Store) -> tuple[list[tuple[dict[str, Any], list[list[Any]]]], list[str]]:
    """Every recorded family the store lacks whose member studies it holds, oldest first, as (its row, its
    members' rows) for `restore_family`; and those that cannot be, each with why (`doctor --repair`, after
    the studies created since its backup are back)."""
    folder = store.home / "families"
    known = {r[0] for r in store.rows("SELECT family_id FROM families")}
    studies = {r[0] for r in store.rows("SELECT study_id FROM studies")}
    records, lost = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.stem in known:
            continue
        try:
            record = read_record(path, FAMILY_RECORD_FORMAT, "family")
            members = [list(m) for m in record["members"]]
            missing = sorted(m[3] for m in members if m[3] not in studies)
            if record["family"].get("family_id") != path.stem or any(m[0] != path.stem for m in members):
                raise HierconsoleError(f"{path}: its rows name another family than its file")
        except HierconsoleError as exc:
            lost.append(f"family {path.stem} ({exc})")
            continue
        except (KeyError, TypeError, IndexError) as exc:
            lost.append(f"family {path.stem} ({path}: not a readable family record: {exc})")
            continue
        if missing:
            lost.append(f"family {path.stem} (its member studies {', '.join(missing)} are not in the rebuilt store)")
        else:
            records.append((record["family"], members))
    return sorted(records, key=lambda r: r[0]["created_at"]), lost


def restore_family(store: Store, family: dict[str, Any], members: list[list[Any]]) -> None:
    """Insert a family's rows as its record has them (`recorded_families`)."""
    store.write(lambda con: _insert_family_rows(con, family, members))


def _discard(store: Store, study_id: str) -> None:
    """Remove a member study created moments ago whose jobs never started."""
    store.execute(
        f"UPDATE jobs SET state = ? WHERE study_id = ? AND state IN ({sql_list(ACTIVE_STATES)})",
        [JobState.CANCELLED, study_id],
    )
    delete_study(store, study_id)
