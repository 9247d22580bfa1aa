"""A preset's levels resolved against a dataset's: which levels train, which the hier score averages,
and the per-level training constants (Taxonomy-SupCon weights, regression targets) for that depth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hierconsole.levels import LevelError, LevelPlan, Levels, default_regression_targets

if TYPE_CHECKING:
    from hierconsole.config.preset import Preset

PAPER_TARGETS: tuple[float, ...] = default_regression_targets(3)
"""The preset default `training.regression_targets`: it means "the default targets of the trained depth"."""


def resolve_plan(preset: Preset, levels: Levels) -> LevelPlan:
    """The study's level plan: every level trained and the hier score over every level above the leaf,
    unless the preset declares others."""
    del preset  # the preset's level options resolve here
    return LevelPlan.default(levels)


def level_weights(preset: Preset, plan: LevelPlan) -> tuple[float, ...]:
    """Taxonomy-SupCon weights of the trained levels, leaf first.

    Equal weights of any count broadcast to the trained depth (the loss renormalises them, so (1, 1, 1)
    means "equal at every level"); any other list must give one weight per trained level.
    """
    weights = tuple(float(w) for w in preset.training.level_weights)
    k = len(plan.trained)
    if len(weights) == k:
        return weights
    if weights and len(set(weights)) == 1:
        return (weights[0],) * k
    raise LevelError(
        f"training.level_weights gives {len(weights)} weights for {k} trained levels "
        f"({', '.join(plan.levels.name(c) for c in plan.trained)}); give one weight per level, leaf first"
    )


def regression_targets(preset: Preset, plan: LevelPlan) -> tuple[float, ...]:
    """Target distances of the K'+1 pair relations of the trained levels (same leaf ... other).

    The preset default stands for the default targets of the trained depth (for three levels exactly the
    default itself); any other list must give K'+1 increasing targets.
    """
    targets = tuple(float(t) for t in preset.training.regression_targets)
    k = len(plan.trained)
    if len(targets) == k + 1:
        return targets
    if targets == PAPER_TARGETS:
        return default_regression_targets(k)
    raise LevelError(
        f"training.regression_targets gives {len(targets)} targets for {k} trained levels; give {k + 1}: "
        f"one per level ({', '.join(plan.levels.name(c) for c in plan.trained)}) and one for unrelated pairs"
    )
