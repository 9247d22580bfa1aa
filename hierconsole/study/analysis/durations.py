"""Per-arm training durations of a study that selects its epoch on validation (`training.select_epoch`).

Every seed of an arm trains to the ceiling and is validated at the candidate epochs; once all seeds have
finished, the arm's duration is frozen at the candidate epoch with the best mean over seeds of the
validation score, and every seed of the arm is scored at that one epoch. Selecting per seed would let the
seeds of one arm differ in duration as well as in seed, so the seed would no longer be the only thing that
varies between replicates of an arm; it is not offered.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hierconsole.config.preset import Preset
from hierconsole.levels import PAPER_LEVELS
from hierconsole.vocabulary import HIER_METRIC, HIER_SCORE, MAP, hier_score

Curves = dict[str, dict[int, dict[int, float]]]
"""arm -> seed -> candidate epoch -> validation score (NaN where the score has no value)."""


@dataclass(frozen=True)
class Duration:
    arm: str
    epoch: int
    score: float
    """The mean over seeds of the validation score at `epoch`."""
    seeds: int


def score_parts(score: str) -> tuple[str, str]:
    """(level, metric) of a selection score: (`hier`, mAP) for the hier score, else e.g. (middle, mAP)
    (split at the last `_`, as every `{level}_{metric}` column is)."""
    if score == HIER_METRIC:
        return HIER_SCORE, MAP
    level, _, metric = score.rpartition("_")
    return level, metric


def selection_score(
    levels: Mapping[str, float | None], level: str, hier: Sequence[str] = PAPER_LEVELS.non_leaf
) -> float:
    """The stored validation mAP of one level, or the hier score of the `hier` levels (the study's
    declared ones; default: middle and high); NaN when it has no value."""
    if level == HIER_SCORE:
        return hier_score(levels, hier=hier)
    value = levels.get(level)
    return math.nan if value is None else float(value)


def validation_curves(
    rows: Iterable[tuple[str, int, int, str, float | None]],
    preset: Preset,
    hier: Sequence[str] = PAPER_LEVELS.non_leaf,
) -> Curves:
    """Each final run's stored validation score at each candidate epoch, by arm and seed, from its rows of
    (arm, seed, epoch, level, value) in the selection score's metric and the preset's aggregation; `hier`:
    the levels the study's hier score averages (`LevelPlan.hier`)."""
    level, _ = score_parts(preset.training.selection_score)
    levels: dict[tuple[str, int, int], dict[str, float | None]] = defaultdict(dict)
    for arm, seed, epoch, lv, value in rows:
        levels[(arm, seed, epoch)][lv] = value
    curves: Curves = defaultdict(lambda: defaultdict(dict))
    for (arm, seed, epoch), by_level in sorted(levels.items()):
        if preset.training.validates_at(epoch):
            curves[arm][seed][epoch] = selection_score(by_level, level, hier)
    return {arm: dict(seeds) for arm, seeds in curves.items()}


def seed_mean_argmax(curve: Mapping[int, Mapping[int, float]], seeds: Iterable[int]) -> tuple[int, float] | None:
    """The candidate epoch with the highest mean over `seeds` of their scores, and that mean.

    Only epochs every seed scored (a finite value) compete; a tie keeps the earliest epoch, so the shorter
    training wins when validation cannot tell them apart. None when no epoch was scored by every seed."""
    seeds = list(seeds)
    epochs = set.intersection(*(set(curve.get(s, {})) for s in seeds)) if seeds else set()
    best: tuple[int, float] | None = None
    for epoch in sorted(epochs):
        values = [curve[s][epoch] for s in seeds]
        if any(math.isnan(v) for v in values):
            continue
        mean = math.fsum(values) / len(values)
        if best is None or mean > best[1]:
            best = (epoch, mean)
    return best


def arm_durations(curves: Curves, arms: Iterable[str], preset: Preset) -> tuple[dict[str, Duration], list[str]]:
    """The frozen duration of every trained arm (`arms`, from its validation `curves`), and a line for each
    arm none can be chosen for."""
    chosen, missing = {}, []
    for arm in arms:
        picked = seed_mean_argmax(curves.get(arm, {}), preset.training.seeds)
        if picked is None:
            missing.append(
                f"{arm}: no candidate epoch has a finite validation {preset.training.selection_score} for every "
                f"seed ({', '.join(map(str, preset.training.seeds))})"
            )
            continue
        chosen[arm] = Duration(arm, picked[0], picked[1], len(preset.training.seeds))
    return chosen, missing
