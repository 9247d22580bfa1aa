"""Families as the front ends show them: each family's members with their study's phase and progress."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hierconsole.errors import NotFoundError
from hierconsole.study.storage import Store
from hierconsole.vocabulary import JobState, Phase


@dataclass(frozen=True)
class MemberRow:
    member: str
    study_id: str
    phase: Phase
    jobs: int
    jobs_finished: int
    overrides: dict[str, Any]


@dataclass(frozen=True)
class FamilyRow:
    family_id: str
    name: str
    created_at: datetime
    definition: dict[str, Any]
    members: list[MemberRow]

    @property
    def jobs(self) -> int:
        return sum(m.jobs for m in self.members)

    @property
    def jobs_finished(self) -> int:
        return sum(m.jobs_finished for m in self.members)

    @property
    def complete(self) -> int:
        """Members whose study is complete."""
        return sum(m.phase == Phase.COMPLETE for m in self.members)


def _members(store: Store, family_id: str) -> list[MemberRow]:
    return [
        MemberRow(r[0], r[1], Phase(r[2]), r[3], r[4], json.loads(r[5]))
        for r in store.rows(
            "SELECT m.member, m.study_id, s.phase, count(j.job_id), count(j.job_id) FILTER (WHERE j.state = ?), "
            "m.overrides FROM family_members m JOIN studies s USING (study_id) LEFT JOIN jobs j USING (study_id) "
            "WHERE m.family_id = ? GROUP BY m.member, m.study_id, s.phase, m.overrides, m.position "
            "ORDER BY m.position",
            [JobState.FINISHED, family_id],
        )
    ]


def list_families(store: Store) -> list[FamilyRow]:
    """Every family, oldest first, with its members in the family's order."""
    return [
        FamilyRow(fid, name, created, json.loads(definition), _members(store, fid))
        for fid, name, created, definition in store.rows(
            "SELECT family_id, name, created_at, definition FROM families ORDER BY created_at, family_id"
        )
    ]


def resolve_family(store: Store, ref: str) -> str:
    """A family id from an id, a unique prefix or a name (the newest of that name)."""
    rows = store.rows(
        "SELECT family_id FROM families WHERE family_id = ? OR name = ? OR starts_with(family_id, ?) "
        "ORDER BY family_id = ? DESC, created_at DESC",
        [ref, ref, ref, ref],
    )
    if not rows:
        known = [r[0] for r in store.rows("SELECT name FROM families ORDER BY created_at")]
        raise NotFoundError(
            f"no family {ref!r} in the store (known: {', '.join(dict.fromkeys(known)) or 'none yet'}); "
            "start one with `hierconsole run FAMILY.toml` or `hierconsole sweep`"
        )
    return rows[0][0]


def get_family(store: Store, ref: str) -> FamilyRow:
    family_id = resolve_family(store, ref)
    return next(f for f in list_families(store) if f.family_id == family_id)


def is_family(store: Store, ref: str) -> bool:
    try:
        resolve_family(store, ref)
    except NotFoundError:
        return False
    return True


def member_study(store: Store, ref: str) -> str:
    """The study of `FAMILY:member`."""
    family_ref, _, member = ref.rpartition(":")
    family = get_family(store, family_ref)
    for m in family.members:
        if m.member == member:
            return m.study_id
    raise NotFoundError(
        f"family {family.name} ({family.family_id}) has no member {member!r}; members: "
        f"{', '.join(m.member for m in family.members)}"
    )
