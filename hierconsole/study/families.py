"""Families in the store: registering every member study of a family preset, and the family's declared
contrasts between its members (paper S9, S10)."""

from __future__ import annotations

import json
import secrets
from datetime import datetime

import duckdb

from hierconsole.config.family import Family
from hierconsole.errors import HierconsoleError
from hierconsole.study import read
from hierconsole.study.catalog import ensure_dataset
from hierconsole.study.contrasts import DEFAULT_METRIC, StudyContrast, compare_studies, parse_arm_pair
from hierconsole.study.effects import PooledEffect, pooled_effects
from hierconsole.study.lifecycle import create_study, delete_study
from hierconsole.study.read.families import FamilyRow, get_family, member_study
from hierconsole.study.records import resolve_study
from hierconsole.study.storage import Store
from hierconsole.study.views import sql_list
from hierconsole.vocabulary import ACTIVE_STATES, HIER_METRIC, JobState, Phase


def new_family_id(family: Family) -> str:
    return f"{family.name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def create_family(store: Store, family: Family, dataset: str | None = None) -> tuple[str, list[str]]:
    """Register a family: one study per member (all sharing the training seeds), queued; returns the
    family id and the member studies in order. If a member cannot be created, none is kept."""
    datasets = [ensure_dataset(store, dataset or m.preset.data.dataset) for m in family.members]
    created: list[str] = []
    try:
        for member, dataset_id in zip(family.members, datasets, strict=True):
            created.append(create_study(store, member.preset, dataset_id))
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


def resolve_reference(store: Store, ref: str) -> str:
    """A study from a study reference or `FAMILY:member`."""
    if ":" in ref:
        return member_study(store, ref)
    return resolve_study(store, ref)


def _declared(store: Store, family: FamilyRow, contrast: dict, metric: str, labels: tuple[str, str]) -> StudyContrast:
    """One contrast as the family's definition declares it (members by name, optional arm pair)."""
    studies = {m.member: m.study_id for m in family.members}
    arms = contrast.get("arms")
    return compare_studies(
        store,
        studies[contrast["a"]],
        studies[contrast["b"]],
        metric=metric,
        arms=None if arms is None else [parse_arm_pair(arms)],
        labels=labels,
        name=contrast["name"],
    )


def family_contrasts(store: Store, ref: str, *, metric: str = DEFAULT_METRIC) -> tuple[FamilyRow, list[StudyContrast]]:
    """Every contrast the family declares, A - B by training seed, members named `FAMILY:member`."""
    family = get_family(store, ref)
    declared = family.definition.get("contrasts", [])
    if not declared:
        raise HierconsoleError(
            f"family {family.name} ({family.family_id}) declares no contrasts\n"
            "  fix: compare two members with `hierconsole contrast FAMILY:A FAMILY:B`"
        )
    return family, [
        _declared(store, family, c, metric, (f"{family.name}:{c['a']}", f"{family.name}:{c['b']}")) for c in declared
    ]


def contrasts_so_far(
    store: Store, family: FamilyRow, *, metric: str = DEFAULT_METRIC
) -> list[tuple[str, StudyContrast | str]]:
    """Each declared contrast of a family as far as it can be computed now: the contrast, or why not
    yet (a member still training, a refusal). For views that show a family while it runs."""
    out: list[tuple[str, StudyContrast | str]] = []
    for c in family.definition.get("contrasts", []):
        try:
            result: StudyContrast | str = _declared(store, family, c, metric, (c["a"], c["b"]))
        except HierconsoleError as exc:
            result = str(exc).splitlines()[0]
        out.append((c["name"], result))
    return out


def family_effects(store: Store, ref: str, *, metric: str = HIER_METRIC) -> tuple[FamilyRow, dict[str, PooledEffect]]:
    """The within-study effects of every member, pooled with the member as the unit (outer splits)."""
    family = get_family(store, ref)
    waiting = [m.member for m in family.members if m.phase != Phase.COMPLETE]
    if waiting:
        raise HierconsoleError(
            f"family {family.name} ({family.family_id}): member(s) {', '.join(waiting)} are not complete; "
            "pooled effects need every member evaluated"
        )
    tables = {m.member: read.per_seed(store, m.study_id) for m in family.members}
    return family, pooled_effects(tables, metric)
