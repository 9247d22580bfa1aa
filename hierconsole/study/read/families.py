"""Families as the front ends show them: each family's members with their study's phase and progress, the
contrasts the family declares between its members (paper S9, S10), its members' pooled effects and, for an
outer-split family with arms, the arms over splits and their paired gains (Sec. 5.5)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.levels import PAPER_LEVELS
from hierconsole.study.analysis.contrasts import (
    DEFAULT_METRIC,
    StudyContrast,
    as_one_family,
    contrasts_frame,
    parse_arm_pair,
)
from hierconsole.study.analysis.frames import map_metrics
from hierconsole.study.analysis.outer_arms import OuterArmsView as OuterArmsView
from hierconsole.study.analysis.outer_arms import outer_arms_frame, outer_arms_view, outer_gains_frame
from hierconsole.study.analysis.pooled import PooledEffect as PooledEffect
from hierconsole.study.analysis.pooled import pooled_effects
from hierconsole.study.db.catalog import study_levels
from hierconsole.study.db.records import resolve_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read.contrasts import compare_studies
from hierconsole.study.read.results import baselines, per_seed
from hierconsole.vocabulary import HIER_METRIC, JobState, Phase


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


def family_contrasts(
    store: Store, ref: str, *, metric: str = DEFAULT_METRIC, sesoi: float | None = None
) -> tuple[FamilyRow, list[StudyContrast]]:
    """Every contrast the family declares, A - B by training seed, members named `FAMILY:member`: their rows
    one multiplicity family (`family NAME`), each with its TOST and verdict given a `sesoi`."""
    family = get_family(store, ref)
    declared = family.definition.get("contrasts", [])
    if not declared:
        raise HierconsoleError(
            f"family {family.name} ({family.family_id}) declares no contrasts\n"
            "  fix: compare two members with `hierconsole contrast FAMILY:A FAMILY:B`"
        )
    contrasts = [
        _declared(store, family, c, metric, (f"{family.name}:{c['a']}", f"{family.name}:{c['b']}")) for c in declared
    ]
    return family, as_one_family(contrasts, f"family {family.name}", sesoi=sesoi)


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


def family_effects(
    store: Store, ref: str, *, metric: str = HIER_METRIC, sesoi: float | None = None
) -> tuple[FamilyRow, dict[str, PooledEffect]]:
    """The within-study effects of every member, pooled with the member as the unit (outer splits); with a
    `sesoi`, each with its TOST and verdict."""
    family = get_family(store, ref)
    waiting = [m.member for m in family.members if m.phase != Phase.COMPLETE]
    if waiting:
        raise HierconsoleError(
            f"family {family.name} ({family.family_id}): member(s) {', '.join(waiting)} are not complete; "
            "pooled effects need every member evaluated"
        )
    tables = {m.member: per_seed(store, m.study_id) for m in family.members}
    return family, pooled_effects(tables, metric, sesoi=sesoi)


def family_outer_arms(store: Store, ref: str) -> tuple[FamilyRow, OuterArmsView]:
    """An outer-split family's arms (mean ± SD over splits) and paired gains per split (paper Sec. 5.5)."""
    family = get_family(store, ref)
    outer = family.definition.get("outer")
    if outer is None:
        raise HierconsoleError(
            f"family {family.name} ({family.family_id}) declares no outer-split arms ([splits] and [[arms]]): "
            "run one that does (e.g. nabirds-parent-disjoint-outer-arms), or pool this family's effects with "
            "`hierconsole effects FAMILY`"
        )
    waiting = [m.member for m in family.members if m.phase != Phase.COMPLETE]
    if waiting:
        raise HierconsoleError(
            f"family {family.name} ({family.family_id}): member(s) {', '.join(waiting)} are not complete; "
            "the arms over outer splits need every member evaluated"
        )
    tables = {}
    for m in family.members:
        cells = per_seed(store, m.study_id)
        scored = baselines(store, m.study_id)
        tables[m.member] = cells if scored is None else pl.concat([cells, scored], how="diagonal")
    # The members share one dataset, hence one set of levels.
    levels = study_levels(store, family.members[0].study_id).levels if family.members else PAPER_LEVELS
    return family, outer_arms_view(family.name, outer, tables, map_metrics(levels))


def outer_arms_so_far(store: Store, family: FamilyRow) -> OuterArmsView | str | None:
    """A family's arms over outer splits as far as they go now: the view, why not yet (a member still
    running), or None for a family without outer-split arms. Stored results that lack a declared arm
    raise, as `family_outer_arms` does."""
    if family.definition.get("outer") is None:
        return None
    waiting = [m.member for m in family.members if m.phase != Phase.COMPLETE]
    if waiting:
        return f"shown once every member is complete ({', '.join(waiting)} not yet)"
    return family_outer_arms(store, family.family_id)[1]


def family_contrasts_frame(store: Store, ref: str, *, metric: str = DEFAULT_METRIC) -> pl.DataFrame:
    """The `contrasts` table of a family (`export contrasts --family F`): its declared contrasts, long."""
    _, contrasts = family_contrasts(store, ref, metric=metric)
    return contrasts_frame(contrasts)


def family_outer_frame(store: Store, ref: str, *, gains: bool = False) -> pl.DataFrame:
    """The `outer-arms` table of an outer-split family (`export outer-arms --family F`, `home.outer_arms`):
    per arm and metric a column per split, mean and SD; `gains`: its paired gains per split (`outer-gains`)."""
    _, view = family_outer_arms(store, ref)
    return outer_gains_frame(view) if gains else outer_arms_frame(view)
