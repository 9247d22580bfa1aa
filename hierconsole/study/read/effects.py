"""A study's effects screen (`analysis.effects_view.EffectsView`) read from the store: the one source of
`hierconsole effects`, `effects --json` and the console's Effects and Redistribution views."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from hierconsole.metrics.names import whole_tree_metric
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import omitted_text
from hierconsole.study.analysis.effects_view import EffectsView as EffectsView
from hierconsole.study.analysis.effects_view import effects_view
from hierconsole.study.analysis.per_seed import metric_columns, table_levels
from hierconsole.study.analysis.redistribution import Redistribution as Redistribution
from hierconsole.study.analysis.redistribution import can_redistribute, redistribution
from hierconsole.study.analysis.statistics import SESOI_HELP as SESOI_HELP
from hierconsole.study.analysis.statistics import parse_sesoi as parse_sesoi
from hierconsole.study.db.catalog import study_levels
from hierconsole.study.db.storage import Store
from hierconsole.study.read.results import baselines, per_seed, reported_aggregation
from hierconsole.vocabulary import BASELINE_SEED


def study_effects(
    store: Store,
    study_id: str,
    metrics: Sequence[str] | None = None,
    *,
    effect_metrics: Sequence[str] | None = None,
    aggregation: str | None = None,
    sesoi: float | None = None,
) -> EffectsView:
    """`metrics` for the arm table (default: every metric), `effect_metrics` for the effects (default:
    `metrics`); the redistribution whenever every level's mAP is among them. `aggregation` (default: the
    registered one) may name a finished post-hoc re-score: its view says so in its source and label. With
    a `sesoi` (smallest effect size of interest), every effect's TOST and verdict against it."""
    reported = reported_aggregation(store, study_id, aggregation)
    return effects_view(
        per_seed(store, study_id, reported.name),
        source=f"study {study_id}, {reported.label}" if reported.posthoc else f"study {study_id}",
        metrics=metrics,
        effect_metrics=effect_metrics,
        baselines=baselines(store, study_id, reported.name),
        aggregation=reported.label,
        posthoc=reported.posthoc,
        levels=study_levels(store, study_id).levels,
        sesoi=sesoi,
    )


def whole_tree_columns(per_seed: pl.DataFrame) -> tuple[str, ...]:
    """The per-seed table's columns of the whole tree's metrics (`evaluation.metrics`), in their order."""
    return tuple(c for c in metric_columns(per_seed) if whole_tree_metric(c))


def effects_so_far(
    store: Store, study_id: str | None, scored: pl.DataFrame, metric: str, measure: str, aggregation: str | None
) -> tuple[EffectsView, pl.DataFrame | None] | None:
    """The console's Effects view of the seeds `scored` so far (a per-seed table): the same view as
    `hierconsole effects` of `metric`, and (with the study's baselines) every level of `measure` beside
    them; None when `metric` is not among the table's columns."""
    if metric not in metric_columns(scored):
        return None
    base = None if study_id is None else baselines(store, study_id, aggregation)
    if base is not None:
        # Only the seeds scored so far, so a trained baseline pairs with the cells it is shown beside.
        base = base.filter(pl.col("seed").is_in([BASELINE_SEED, *scored["seed"].unique().to_list()]))
    levels = None if study_id is None else study_levels(store, study_id).levels
    view = effects_view(scored, source=f"study {study_id}", metrics=[metric], baselines=base, levels=levels)
    if whole_tree_metric(measure):  # one value per arm: the arm table above has it, no level table
        return view, None
    columns = [m for m in metric_columns(scored) if m.endswith(f"_{measure}")]
    return view, arm_table(scored, columns, baselines=base) if base is not None else None


def redistribution_so_far(
    scored: pl.DataFrame, measure: str, levels: Sequence[str] | None = None
) -> Redistribution | str | None:
    """The console's Redistribution view of the seeds `scored` so far: H - E at each level of `measure`
    (`levels`: the study's codes, leaf first; default: those of the table's columns); what is left out (a
    line) when the study lacks the arms of both contrasts; None when `measure` is not stored at every
    level."""
    codes = table_levels(scored.columns) if levels is None else tuple(levels)
    if not all(f"{level}_{measure}" in scored.columns for level in codes):
        return None
    if not can_redistribute(scored):
        return omitted_text(scored["arm"].to_list())
    return redistribution(scored, measure, levels=codes)
