"""Everything a figure or a report shows about a study or a family, gathered once.

The read layer fills these (`study.read.report_inputs`); the figures and the report (`present.report`) only
draw and lay them out. They live here, below both, because the two rooms may not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from hierconsole.levels import PAPER_LEVELS, LevelError, Levels
from hierconsole.study.analysis.audits.result import Check
from hierconsole.study.analysis.contrasts import StudyContrast
from hierconsole.study.analysis.effects import SimpleEffects
from hierconsole.study.analysis.headline import Headline
from hierconsole.study.analysis.outer_arms import OuterArmsView
from hierconsole.study.analysis.pooled import PooledEffect
from hierconsole.study.analysis.redistribution import Redistribution


def level_label(level: str, level_names: tuple[str, ...]) -> str:
    """``"Genus (middle)"``: a level by its dataset's own name, with its code beside it (once, when the
    two are the same word); the code alone when `level_names` do not name it."""
    try:
        levels = Levels.of(level_names)
    except LevelError:
        return level
    if level in levels.codes:
        name = levels.name(level)
        return name if name.lower() == level else f"{name} ({level})"
    return level


@dataclass(frozen=True)
class StudyInputs:
    """A study's protocol, provenance and results, as the figures and the report need them."""

    study_id: str
    name: str
    dataset_id: str
    phase: str
    level_names: tuple[str, ...]
    """The dataset's display names of its levels, leaf first (`levels.names`)."""
    preset: dict[str, Any]
    """The preset as registered (its canonical form)."""
    overrides: dict[str, Any]
    """Dotted key -> value where the registered preset differs from the shipped preset of its name (and a
    family member's own overrides): what a `--set` must repeat to regenerate it."""
    preset_name: str | None
    """The shipped preset the study started from, when one of that name exists; None otherwise."""
    provenance: dict[str, Any]
    seeds: list[int]
    per_seed: pl.DataFrame | None
    """None while the study has no official-test metrics (phase before complete)."""
    baselines: pl.DataFrame | None
    arms: pl.DataFrame | None
    """`study.analysis.arms.arm_table` with the baselines."""
    effects: SimpleEffects
    omitted: str | None
    headline: list[Headline]
    redistribution: Redistribution | None
    variance: pl.DataFrame | None
    audits: list[Check]
    audits_recorded: bool
    curves: pl.DataFrame
    """seed, arm, epoch, train_loss of the final runs."""
    validation: pl.DataFrame
    """seed, arm, epoch, score: the validation hier score of the final runs, per validation pass."""
    tuning: pl.DataFrame
    """geometry, tau, `{code}_mAP` of each hier level (three levels: middle_mAP, high_mAP), score, status
    (S6); empty when the temperatures were fixed."""
    posthoc: dict[str, SimpleEffects] = field(default_factory=dict)
    """Re-scored aggregation -> the effects under it: post-hoc, never the registered endpoint."""
    registered_aggregation: str = ""
    family: tuple[str, str] | None = None
    """(family name, member) when the study is a family's member."""
    levels: Levels = PAPER_LEVELS
    """The study's levels, leaf first: codes (its columns, `{code}_mAP`) and display names."""
    hier: tuple[str, ...] = PAPER_LEVELS.non_leaf
    """The level codes the study's hier score averages (`LevelPlan.hier`)."""


@dataclass(frozen=True)
class MemberInputs:
    member: str
    study_id: str
    phase: str
    overrides: dict[str, Any]
    curvature: float | None
    radius: float | None
    """The Poincaré operating point (c, r); None for a member training Euclidean cells only, which has none."""
    arms: tuple[str, ...]
    """The cells the member trains."""
    per_seed: pl.DataFrame | None
    """None until the member is evaluated."""


@dataclass(frozen=True)
class FamilyInputs:
    """A family: its members, its declared contrasts and, when every member is evaluated, pooled effects."""

    family_id: str
    name: str
    definition: dict[str, Any]
    members: list[MemberInputs]
    contrasts: list[tuple[str, StudyContrast | str]]
    """Declared contrast name -> the contrast, or why it cannot be computed yet."""
    pooled: dict[str, PooledEffect] | str
    """The members' effects pooled with the member as the unit, or why not (a member not evaluated)."""
    level_names: tuple[str, ...]
    provenance: dict[str, Any]
    metric: str
    outer: OuterArmsView | str | None = None
    """An outer-split family's arms over splits and paired gains, why not (yet), or None (no arms)."""
    levels: Levels = PAPER_LEVELS
    """The members' levels (one dataset), leaf first."""
    hier: tuple[str, ...] = PAPER_LEVELS.non_leaf
    """The levels the members' hier score averages (their first member's declaration)."""
