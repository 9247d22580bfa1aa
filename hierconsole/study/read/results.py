"""A study's results as tables: stored test metrics, per-seed tables and every exportable table."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from hierconsole.datasets import splits
from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.levels import WHOLE_TREE
from hierconsole.study.analysis.frames import ANALYSIS_TABLES as ANALYSIS_TABLES
from hierconsole.study.analysis.frames import FAMILY_TABLES as FAMILY_TABLES
from hierconsole.study.analysis.frames import POSTHOC_TABLES as POSTHOC_TABLES
from hierconsole.study.analysis.frames import TABLES as TABLES
from hierconsole.study.analysis.frames import analysis_frame
from hierconsole.study.analysis.frames import check_table as check_table
from hierconsole.study.analysis.per_seed import (
    baseline_perturbations_from_long,
    baselines_from_long,
    per_perturbation_from_long,
    per_seed_from_long,
)
from hierconsole.study.analysis.variance import arm_variance
from hierconsole.study.db import split_files
from hierconsole.study.db.catalog import study_levels
from hierconsole.study.db.ids import rescore_job_id
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import sql_list, tuning_sql
from hierconsole.vocabulary import (
    AGGREGATIONS,
    BASELINES,
    RANKING_METRICS,
    JobState,
    aggregation_label,
)


def empty_levels(store: Store, study_id: str) -> tuple[str, ...]:
    """Levels without a valid query in some official Q/G perturbation, from the strict valid counts the
    study recorded when its splits were made (before any training): excluded from its tables."""
    valid = [
        json.loads(v)
        for (v,) in store.rows(
            f"SELECT valid FROM splits WHERE study_id = ? AND {split_files.QG_ROLES_SQL} ORDER BY role",
            [study_id],
        )
    ]
    return splits.empty_levels(valid, study_levels(store, study_id).levels)


def registered_aggregation(store: Store, study_id: str) -> str:
    return get_study(store, study_id).preset.evaluation.aggregation


def aggregations(store: Store, study_id: str) -> list[str]:
    """Aggregations with stored test metrics: the registered one first, re-scored ones after."""
    found = [
        r[0] for r in store.rows("SELECT DISTINCT aggregation FROM metrics WHERE study_id = ?", [study_id])
    ]
    reg = registered_aggregation(store, study_id)
    return sorted(found, key=lambda a: (a != reg, a))


@dataclass(frozen=True)
class ReportedAggregation:
    """The aggregation a table reports: the registered one, or a finished post-hoc re-score's."""

    name: str
    posthoc: bool

    @property
    def label(self) -> str:
        return aggregation_label(self.name, self.posthoc)


def reported_aggregation(store: Store, study_id: str, aggregation: str | None = None) -> ReportedAggregation:
    """`aggregation` (default: the registered one) checked against the store: another aggregation is
    reported only from a finished re-score, and always as post-hoc (it never replaces the endpoint)."""
    registered = registered_aggregation(store, study_id)
    if aggregation is None or aggregation == registered:
        return ReportedAggregation(registered, posthoc=False)
    if aggregation not in AGGREGATIONS:
        raise HierconsoleError(f"--aggregate {aggregation!r} is not one of {', '.join(AGGREGATIONS)}")
    fix = f"  fix: hierconsole rescore {study_id} --aggregate {aggregation}"
    found = store.rows("SELECT state FROM jobs WHERE job_id = ?", [rescore_job_id(study_id, aggregation)])
    state = found[0][0] if found else None
    if state is None:
        raise HierconsoleError(
            f"study {study_id} has no {aggregation} re-score (its registered aggregation is {registered})\n{fix}"
        )
    if state != JobState.FINISHED:
        raise HierconsoleError(f"the {aggregation} re-score of study {study_id} is {state}, not finished\n{fix}")
    return ReportedAggregation(aggregation, posthoc=True)


def metrics_long(
    store: Store, study_id: str, aggregation: str | None = None, *, arms: tuple[str, ...] | None = None
) -> pl.DataFrame:
    """The stored ranking metrics of a study's cells, whatever its factorial (or of `arms`, e.g.
    BASELINES) under one aggregation (default: the registered one)."""
    agg = aggregation or registered_aggregation(store, study_id)
    which = f"arm IN ({sql_list(arms)})" if arms is not None else f"arm NOT IN ({sql_list(BASELINES)})"
    return store.frame(
        "SELECT seed, arm, perturbation, level, metric, value FROM metrics "
        f"WHERE study_id = ? AND aggregation = ? AND (metric IN ({sql_list(RANKING_METRICS)}) OR level = ?) "
        f"AND {which} ORDER BY seed, arm, perturbation, level, metric",
        [study_id, agg, WHOLE_TREE],
    )


def baselines(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame | None:
    """The baseline arms' table (arm, metric columns; perturbations averaged), or None when the study
    has none scored (yet)."""
    long = metrics_long(store, study_id, aggregation, arms=BASELINES)
    if long.is_empty():
        return None
    return baselines_from_long(
        long,
        source=f"study {study_id} (baselines)",
        excluded=empty_levels(store, study_id),
        plan=study_levels(store, study_id),
    )


def per_seed(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame:
    """The per-seed wide table (arm, seed, metric columns), Q/G perturbations averaged within seed."""
    long = metrics_long(store, study_id, aggregation)
    if long.is_empty():
        phase = get_study(store, study_id).phase
        raise HierconsoleError(
            f"study {study_id} has no official-test metrics yet (phase: {phase}); they appear once every "
            "final run has finished and the locked study has been evaluated"
        )
    return per_seed_from_long(
        long, source=f"study {study_id}", excluded=empty_levels(store, study_id), plan=study_levels(store, study_id)
    )


def variance(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame:
    """Variance components per arm (cells, then the baselines) and metric: between seeds, within a seed's
    Q/G perturbations (`study.analysis.variance`)."""
    long = metrics_long(store, study_id, aggregation)
    if long.is_empty():
        per_seed(store, study_id, aggregation)  # says why there is nothing yet
    excluded = empty_levels(store, study_id)
    plan = study_levels(store, study_id)
    tables = [per_perturbation_from_long(long, source=f"study {study_id}", excluded=excluded, plan=plan)]
    base = metrics_long(store, study_id, aggregation, arms=BASELINES)
    if not base.is_empty():
        tables.append(
            baseline_perturbations_from_long(
                base, source=f"study {study_id} (baselines)", excluded=excluded, plan=plan
            )
        )
    return arm_variance(pl.concat(tables, how="diagonal"))


def evaluated_per_seed(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame | None:
    """The per-seed table restricted to seeds whose trained arms are scored on every Q/G perturbation.

    While an evaluation runs, metrics arrive seed by seed; a half-scored seed would break the pairing of
    arms, so it is left out until complete. None while no seed is complete.
    """
    long = metrics_long(store, study_id, aggregation)
    if long.is_empty():
        return None
    n_perturbations = store.value(
        f"SELECT count(*) FROM splits WHERE study_id = ? AND {split_files.QG_ROLES_SQL}", [study_id]
    )
    complete = (
        long.group_by("seed")
        .agg(pl.struct("arm", "perturbation").n_unique().alias("cells"))
        .filter(pl.col("cells") == len(get_study(store, study_id).preset.cells) * n_perturbations)["seed"]
    )
    long = long.filter(pl.col("seed").is_in(complete.implode()))
    if long.is_empty():
        return None
    return per_seed_from_long(
        long, source=f"study {study_id}", excluded=empty_levels(store, study_id), plan=study_levels(store, study_id)
    )


def selected_epochs(store: Store, study_id: str) -> list[dict]:
    """Per arm of a study with `training.select_epoch`: the duration frozen at the lock (one epoch for every
    seed), the seed-mean validation score that chose it and the number of seeds; empty before the lock."""
    return store.dicts(
        "SELECT arm, epoch, score, seeds FROM arm_durations WHERE study_id = ? ORDER BY arm", [study_id]
    )


RAW_TABLES = {
    "runs": "SELECT r.run_id, r.study_id, r.kind, r.seed, r.arm, r.geometry, r.loss, r.tau, j.state, "
    "r.trainable_params, r.updates, r.init_sha256, r.final_sha256, r.reload_max_diff, r.best_epoch, "
    "r.best_score, r.max_norm FROM runs r JOIN jobs j USING (job_id) WHERE r.study_id = ? ORDER BY r.run_id",
    "metrics": "SELECT study_id, run_id, seed, arm, perturbation, aggregation, level, metric, value, posthoc "
    "FROM metrics WHERE study_id = ? ORDER BY run_id, perturbation, aggregation, level, metric",
    "audits": "SELECT study_id, check_name, ok, evidence, checked_at FROM audits WHERE study_id = ? "
    "ORDER BY check_name",
    "durations": "SELECT study_id, arm, epoch, score, seeds FROM arm_durations WHERE study_id = ? ORDER BY arm",
}
"""The exportable tables read straight from the store, by their SQL (and `tuning`, :func:`tuning_frame`)."""


def tuning_frame(store: Store, study_id: str) -> pl.DataFrame:
    """study_id, geometry, tau, the validation mAP of each hier level in the study's hier order
    (`{level}_mAP`; three levels: middle_mAP, high_mAP), score, status: one row per candidate."""
    return store.frame(_tuning_sql(study_levels(store, study_id).hier), [study_id])


def _tuning_sql(hier: tuple[str, ...]) -> str:
    """The tuning table with one `{level}_mAP` column per hier level (`tuning` and `tuning_levels`)."""
    return tuning_sql(hier)


BUILT_TABLES: dict[str, Callable[[Store, str], pl.DataFrame]] = {"tuning": tuning_frame}
"""Stored tables whose columns follow the study's levels (one `{code}_mAP` per hier level)."""


def table_frame(store: Store, table: str, study_id: str, aggregation: str | None = None) -> pl.DataFrame:
    """An exportable table of a study (`TABLES`): analysis tables or raw store rows.

    With a post-hoc `aggregation` (`reported_aggregation`) an analysis table leads with an `aggregation`
    column naming it so (`macro (post-hoc)`), so no copy of it can pass for the registered endpoint.
    """
    if aggregation is not None and table not in POSTHOC_TABLES:
        raise HierconsoleError(
            f"table {table!r} is read straight from the store (every aggregation it holds); --aggregate "
            f"applies to {', '.join(POSTHOC_TABLES)}\n  fix: leave out --aggregate"
        )
    reported = reported_aggregation(store, study_id, aggregation)
    agg = reported.name
    if table in ANALYSIS_TABLES:
        frame = analysis_frame(
            table,
            per_seed(store, study_id, agg),
            source=f"study {study_id}",
            baselines=baselines(store, study_id, agg),
            levels=study_levels(store, study_id).levels,
        )
    elif table == "variance":
        frame = variance(store, study_id, agg)
    elif table in BUILT_TABLES:
        return BUILT_TABLES[table](store, study_id)
    elif table in RAW_TABLES:
        return store.frame(RAW_TABLES[table], [study_id])
    else:
        raise NotFoundError(f"unknown table {table!r}")
    if reported.posthoc:
        frame = frame.select(pl.lit(reported.label).alias("aggregation"), pl.all())
    return frame
