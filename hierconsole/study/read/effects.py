"""A study's effects screen (`analysis.effects_view.EffectsView`) read from the store: the one source of
`hierconsole effects`, `effects --json` and the console's Effects view."""

from __future__ import annotations

from collections.abc import Sequence

from hierconsole.study.analysis.effects_view import EffectsView, effects_view
from hierconsole.study.db.storage import Store
from hierconsole.study.read.results import baselines, per_seed


def study_effects(
    store: Store,
    study_id: str,
    metrics: Sequence[str] | None = None,
    *,
    effect_metrics: Sequence[str] | None = None,
) -> EffectsView:
    """`metrics` for the arm table (default: every metric), `effect_metrics` for the effects (default:
    `metrics`); the redistribution whenever every level's mAP is among them."""
    return effects_view(
        per_seed(store, study_id),
        source=f"study {study_id}",
        metrics=metrics,
        effect_metrics=effect_metrics,
        baselines=baselines(store, study_id),
    )
