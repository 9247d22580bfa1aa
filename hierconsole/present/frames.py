"""The notebook's frames (`hierconsole.open_home`): read-layer results laid out long, one row per value, for polars (or pandas).

Where a study has seeds, every row holds one seed's value and, beside it, the summary over the seeds
(a `study.analysis.paired.PairedSummary`: mean, sample SD, positive seeds, n seeds, intervals, tests),
repeated on each of its seeds' rows: filter by seed for the per-seed values, or take one row per
(metric, effect) for the summary (`summary=True` does that). The numbers are the read layer's own,
never recomputed here, so they equal what `hierconsole ... --json` prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from hierconsole.study.analysis.audits.result import Check
from hierconsole.study.analysis.contrasts import StudyContrast
from hierconsole.study.analysis.effects import Effect, SimpleEffects, iter_effects
from hierconsole.study.analysis.paired import PairedSummary, summary_schema
from hierconsole.study.analysis.pooled import PooledEffect
from hierconsole.study.read.families import FamilyRow
from hierconsole.study.read.jobs import JobRow
from hierconsole.study.read.studies import StudyRow


def _long(
    keys: Sequence[dict[str, Any]],
    summaries: Sequence[PairedSummary],
    key_schema: dict[str, Any],
    *,
    summary: bool,
    unit: tuple[str, Any] = ("seed", pl.Int64),
) -> pl.DataFrame:
    """Each of `keys` once with its summary (`summary`), or once per unit (seed or member) with that
    unit's value beside the summary."""
    name, dtype = unit
    rows: list[dict[str, Any]] = []
    for key, s in zip(keys, summaries, strict=True):
        columns = s.columns()
        if summary:
            rows.append({**key, **columns})
        else:
            rows.extend({**key, name: u, "value": v, **columns} for u, v in s.per_unit.items())
    schema = {**key_schema, **({} if summary else {name: dtype, "value": pl.Float64}), **summary_schema(name)}
    return pl.DataFrame(rows, schema=schema)


def effects_long(groups: dict[str, SimpleEffects], *, summary: bool = False) -> pl.DataFrame:
    """group, metric, effect, definition, [seed, value,] mean, sd, positive_seeds, n_seeds, evidence."""
    effects: list[tuple[str, Effect]] = [(g, e) for g, by_metric in groups.items() for e in iter_effects(by_metric)]
    return _long(
        [{"group": g, "metric": e.metric, "effect": e.name, "definition": e.definition} for g, e in effects],
        [e for _, e in effects],
        {"group": pl.String, "metric": pl.String, "effect": pl.String, "definition": pl.String},
        summary=summary,
    )


def contrasts_long(contrasts: Iterable[StudyContrast], *, summary: bool = False) -> pl.DataFrame:
    """contrast, a, b, metric, arm_a, arm_b, level, [seed, value,] mean, sd, positive_seeds, n_seeds,
    evidence: metric(A, arm_a, seed) - metric(B, arm_b, seed) per level."""
    pairs = [(c, r) for c in contrasts for r in c.rows]
    return _long(
        [
            {"contrast": c.name or f"{c.a} - {c.b}", "a": c.a, "b": c.b, "metric": c.metric,
             "arm_a": r.arm_a, "arm_b": r.arm_b, "level": r.level}
            for c, r in pairs
        ],  # fmt: skip
        [r for _, r in pairs],
        {k: pl.String for k in ("contrast", "a", "b", "metric", "arm_a", "arm_b", "level")},
        summary=summary,
    )


def pooled_long(family_id: str, pooled: dict[str, PooledEffect], *, summary: bool = False) -> pl.DataFrame:
    """family, metric, effect, definition, [member, value,] mean, sd, positive_members, n_members, evidence:
    each member's effect averaged over its seeds, summarised with the member as the unit."""
    effects = list(pooled.values())
    return _long(
        [{"family": family_id, "metric": e.metric, "effect": e.name, "definition": e.definition} for e in effects],
        effects,
        {"family": pl.String, "metric": pl.String, "effect": pl.String, "definition": pl.String},
        summary=summary,
        unit=("member", pl.String),
    )


def studies_frame(studies: Sequence[StudyRow]) -> pl.DataFrame:
    """One row per study, oldest first, as `hierconsole studies` lists them."""
    return pl.DataFrame(
        [
            {"study_id": s.study_id, "name": s.name, "dataset_id": s.dataset_id, "phase": str(s.phase),
             "created_at": s.created_at, "jobs": s.jobs, "jobs_finished": s.jobs_finished}
            for s in studies
        ],  # fmt: skip
        schema={
            "study_id": pl.String, "name": pl.String, "dataset_id": pl.String, "phase": pl.String,
            "created_at": pl.Datetime("us"), "jobs": pl.Int64, "jobs_finished": pl.Int64,
        },  # fmt: skip
    )


JOB_SCHEMA: dict[str, Any] = {
    "job_id": pl.String,
    "study_id": pl.String,
    "kind": pl.String,
    "seed": pl.Int64,
    "tau": pl.Float64,
    "state": pl.String,
    "shown_state": pl.String,
    "done": pl.Int64,
    "total": pl.Int64,
    "attempts": pl.Int64,
    "eta_seconds": pl.Float64,
    "epoch_seconds": pl.Float64,
    "where": pl.String,
    "error": pl.String,
}


def jobs_frame(jobs: Sequence[JobRow]) -> pl.DataFrame:
    """One row per job as `hierconsole runs` shows it: `shown_state` is `orphaned` for a job stored as
    running that no process orchestrates; `done`/`total` are epochs (training) or units scored."""
    return pl.DataFrame(
        [
            {"job_id": j.job_id, "study_id": j.study_id, "kind": str(j.kind), "seed": j.seed, "tau": j.tau,
             "state": str(j.state), "shown_state": str(j.shown_state), "done": j.done, "total": j.total,
             "attempts": j.attempts, "eta_seconds": j.eta_seconds, "epoch_seconds": j.epoch_seconds,
             "where": j.where, "error": j.error}
            for j in jobs
        ],  # fmt: skip
        schema=JOB_SCHEMA,
    )


def audits_frame(study_id: str, checks: Sequence[Check], *, recorded: bool) -> pl.DataFrame:
    """study_id, check, ok (null: not applicable), evidence, recorded (False: evaluated now, not stored)."""
    return pl.DataFrame(
        [{"study_id": study_id, "check": c.name, "ok": c.ok, "evidence": c.evidence, "recorded": recorded}
         for c in checks],  # fmt: skip
        schema={"study_id": pl.String, "check": pl.String, "ok": pl.Boolean, "evidence": pl.String,
                "recorded": pl.Boolean},  # fmt: skip
    )


def families_frame(families: Sequence[FamilyRow]) -> pl.DataFrame:
    """One row per member, each family's in its order, as `hierconsole families` shows them; `overrides`
    is the member's overrides of the family's base preset as JSON text."""
    return pl.DataFrame(
        [
            {"family_id": family.family_id, "family": family.name, "member": m.member, "study_id": m.study_id,
             "phase": str(m.phase), "jobs": m.jobs, "jobs_finished": m.jobs_finished,
             "overrides": json.dumps(m.overrides, sort_keys=True, default=str)}
            for family in families
            for m in family.members
        ],  # fmt: skip
        schema={
            "family_id": pl.String, "family": pl.String, "member": pl.String, "study_id": pl.String,
            "phase": pl.String, "jobs": pl.Int64, "jobs_finished": pl.Int64, "overrides": pl.String,
        },  # fmt: skip
    )
