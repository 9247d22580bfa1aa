"""A preset's levels resolved against a dataset's: which levels train, which the hier score averages,
and the per-level training constants (Taxonomy-SupCon weights, regression targets) for that depth.

A preset names levels without knowing the data (a code, a display name or a 1-based number), so what
it says is checked in two steps: its form when the preset is read (`config.preset`), and here, against
the dataset's levels, when a study is launched (`check_levels`) and again where a worker builds its plan.
Every refusal is a LevelError of one line naming the option, the value and the dataset's levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hierconsole.config.options import show
from hierconsole.levels import LevelError, LevelPlan, Levels, default_regression_targets
from hierconsole.vocabulary import HIER_METRIC, MAP

if TYPE_CHECKING:
    from hierconsole.config.preset import Preset

PAPER_TARGETS: tuple[float, ...] = default_regression_targets(3)
"""The preset default `training.regression_targets`: it means "the default targets of the trained depth"."""


def _levels_text(levels: Levels) -> str:
    return f"the dataset's levels are {levels.describe()}"


def _resolve(levels: Levels, ref: str, option: str, value: object) -> str:
    """The code of `ref`, one of the levels `option` names (its whole value is `value`)."""
    try:
        return levels.resolve(ref)
    except LevelError:
        raise LevelError(f"{option} = {show(value)}: no level {ref!r}; {_levels_text(levels)}") from None


def _resolve_all(levels: Levels, refs: Sequence[str], option: str) -> tuple[str, ...]:
    """The codes of `refs` in level order (leaf first), whatever order they are written in; a level named
    twice (as 2 and "middle", say) is refused."""
    codes = [_resolve(levels, ref, option, list(refs)) for ref in refs]
    repeated = sorted({c for c in codes if codes.count(c) > 1}, key=levels.codes.index)
    if repeated:
        raise LevelError(
            f"{option} = {show(list(refs))}: names level {', '.join(repeated)} twice; {_levels_text(levels)}"
        )
    return tuple(c for c in levels.codes if c in codes)


def resolve_plan(preset: Preset, levels: Levels) -> LevelPlan:
    """The study's level plan: the levels `training.levels` names (default: every level) and the levels
    `evaluation.hier_levels` names (default: every level above the leaf), as codes in level order."""
    trained = levels.codes
    if preset.training.levels is not None:
        trained = _resolve_all(levels, preset.training.levels, "training.levels")
        if levels.leaf not in trained:
            raise LevelError(
                f"training.levels = {show(list(preset.training.levels))}: leaves out the leaf level "
                f"{_label(levels, levels.leaf)}, which every loss trains on; add it ({_levels_text(levels)})"
            )
    hier = LevelPlan.default(levels).hier
    if preset.evaluation.hier_levels is not None:
        hier = _resolve_all(levels, preset.evaluation.hier_levels, "evaluation.hier_levels")
        if levels.leaf in hier:
            raise LevelError(
                f"evaluation.hier_levels = {show(list(preset.evaluation.hier_levels))}: the hier score never "
                f"counts the leaf level {_label(levels, levels.leaf)}; name levels above it "
                f"({_levels_text(levels)})"
            )
    for option, value, problem in (
        ("training.levels", preset.training.levels, LevelPlan.trained_problem(levels, trained)),
        ("evaluation.hier_levels", preset.evaluation.hier_levels, LevelPlan.hier_problem(levels, hier)),
    ):
        if problem:
            shown = show(list(value)) if value is not None else "(every level)"
            raise LevelError(f"{option} = {shown}: {problem}; {_levels_text(levels)}")
    return LevelPlan(levels, hier, trained)


def _label(levels: Levels, code: str) -> str:
    name = levels.name(code)
    return code if name.lower() == code else f"{code} ({name})"


def _trained_text(plan: LevelPlan) -> str:
    return ", ".join(_label(plan.levels, c) for c in plan.trained)


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
        f"training.level_weights = {show(list(preset.training.level_weights))}: {len(weights)} weights for "
        f"{k} trained levels ({_trained_text(plan)}); give one weight per trained level, leaf first, or equal "
        f"weights ({_levels_text(plan.levels)})"
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
        f"training.regression_targets = {show(list(preset.training.regression_targets))}: {len(targets)} "
        f"targets for {k} trained levels ({_trained_text(plan)}); give {k + 1}, one per trained level and one "
        f"for unrelated pairs ({_levels_text(plan.levels)})"
    )


def selection_score(preset: Preset, levels: Levels) -> str:
    """The validation score an epoch selection uses (`training.selection_score`): the hier score or
    `{code}_mAP` of one of the dataset's levels."""
    score = preset.training.selection_score
    if score == HIER_METRIC:
        return score
    code, _, metric = score.rpartition("_")
    if metric != MAP or code not in levels.codes:
        raise LevelError(
            f"training.selection_score = {show(score)}: no level {code!r}; give {HIER_METRIC!r} or a level's "
            f"'{{code}}_{MAP}' ({_levels_text(levels)})"
        )
    return score


def check_levels(preset: Preset, levels: Levels) -> LevelPlan:
    """What the preset says about levels, checked against the dataset's before a study is created: the
    plan, its weights and targets, and the selection score (`split.level` is the splits' own:
    `datasets.splits.split_level_index`). Raises LevelError (one line) for the first that does not fit."""
    plan = resolve_plan(preset, levels)
    level_weights(preset, plan)
    regression_targets(preset, plan)
    if preset.training.select_epoch:
        selection_score(preset, levels)
    return plan
