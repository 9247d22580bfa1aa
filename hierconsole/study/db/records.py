"""A study's row in the store: its preset as registered, phase, temperatures, lock and seal times."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from hierconsole.config.preset import Preset
from hierconsole.errors import NotFoundError
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import Phase


@dataclass(frozen=True)
class StudyInfo:
    study_id: str
    name: str
    dataset_id: str
    phase: Phase
    preset: Preset
    """The preset as registered (its canonical JSON in the store), not as the shipped file reads now."""
    preset_sha256: str
    temperatures: dict[str, float] | None
    locked_at: datetime | None
    test_first_read_at: datetime | None


def get_study(store: Store, study_id: str) -> StudyInfo:
    rows = store.dicts("SELECT * FROM studies WHERE study_id = ?", [study_id])
    if not rows:
        known = [r[0] for r in store.rows("SELECT study_id FROM studies ORDER BY created_at")]
        raise NotFoundError(
            f"no study {study_id!r} in the store (known: {', '.join(known) or 'none yet'}); "
            "start one with `hierconsole run PRESET`"
        )
    r = rows[0]
    return StudyInfo(
        study_id=r["study_id"],
        name=r["name"],
        dataset_id=r["dataset_id"],
        phase=Phase(r["phase"]),
        preset=Preset.from_dict(json.loads(r["preset"]), source=f"study {study_id}", recorded=True),
        preset_sha256=r["preset_sha256"],
        temperatures=json.loads(r["temperatures"]) if r["temperatures"] else None,
        locked_at=r["locked_at"],
        test_first_read_at=r["test_first_read_at"],
    )


def resolve_study(store: Store, study: str | None) -> str:
    """A study id from an id, a unique prefix, a study name (newest wins), or None for the newest."""
    if study is None:
        row = store.one("SELECT study_id FROM studies ORDER BY created_at DESC LIMIT 1")
        if row is None:
            raise NotFoundError("the store holds no study yet; start one with `hierconsole run PRESET`")
        return row[0]
    rows = store.rows(
        "SELECT study_id FROM studies WHERE study_id = ? OR name = ? OR starts_with(study_id, ?) "
        "ORDER BY study_id = ? DESC, created_at DESC",
        [study, study, study, study],
    )
    if not rows:
        get_study(store, study)  # raises with the list of known studies
    return rows[0][0]
