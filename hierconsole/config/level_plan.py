"""A preset's levels resolved against a dataset's: which levels train, which the hier score averages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hierconsole.levels import LevelPlan, Levels

if TYPE_CHECKING:
    from hierconsole.config.preset import Preset


def resolve_plan(preset: Preset, levels: Levels) -> LevelPlan:
    """The study's level plan: every level trained and the hier score over every level above the leaf,
    unless the preset declares others."""
    del preset  # the preset's level options resolve here
    return LevelPlan.default(levels)
