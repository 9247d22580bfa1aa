"""A study's effects screen (`analysis.effects_view.EffectsView`) read from the store: the one source of
`hierconsole effects`, `effects --json` and the console's Effects view."""

from __future__ import annotations

from collections.abc import Sequence

from hierconsole.study.analysis.effects_view import EffectsView, effects_view
from hierconsole.study.db.storage import Store
from hierconsole.study.read.results import baselines, per_seed, reported_aggregation


def study_effects(
    store: Store,
    study_id: str,
    metrics: Sequence[str] | None = None,
    *,
    effect_metrics: Sequence[str] | None = None,
    aggregation: str | None = None,
) -> EffectsView:
    """`metrics` for the arm table (default: every metric), `effect_metrics` for the effects (default:
    `metrics`); the redistribution whenever every level's mAP is among them. `aggregation` (default: the
    registered one) may name a finished post-hoc re-score: its view says so in its source and label."""
    reported = reported_aggregation(store, study_id, aggregation)
    return effects_view(
        per_seed(store, study_id, reported.name),
        source=f"study {study_id}, {reported.label}" if reported.posthoc else f"study {study_id}",
        metrics=metrics,
        effect_metrics=effect_metrics,
        baselines=baselines(store, study_id, reported.name),
        aggregation=reported.label,
        posthoc=reported.posthoc,
    )
