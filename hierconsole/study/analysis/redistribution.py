"""Level-wise redistribution (paper §5.4): H_S - E_S and H_R - E_R of one metric at every level, and the
level-wise gains and losses of every simple effect (:func:`level_effects`)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from hierconsole.errors import InputError
from hierconsole.factorial import PAPER, Factorial
from hierconsole.study.analysis.effects import Effect, simple_effects
from hierconsole.study.analysis.per_seed import (
    DEFAULT_SOURCE,
    LevelsLike,
    arms_present,
    codes_of,
    metric_columns,
    table_levels,
    try_arm,
)


@dataclass(frozen=True)
class Redistribution:
    """H_S - E_S and H_R - E_R of one metric at each level (paper §5.4)."""

    metric: str
    contrasts: dict[str, dict[str, Effect]]
    """contrast (geom_S, geom_R) -> level (leaf ... top) -> Effect of column ``{level}_{metric}``."""
    pattern: dict[str, bool]
    """contrast -> whether the means go down at every level below the top and up at the top."""
    seeds_with_pattern: dict[str, int]
    """contrast -> number of seeds showing that sign pattern on their own."""
    n_seeds: int

    @property
    def paper_geometries(self) -> bool:
        """Whether every contrast is Poincaré minus Euclidean (the paper's H − E), so views may say so."""
        return all(self.definition(c).startswith("H_") and " - E_" in self.definition(c) for c in self.contrasts)

    @property
    def difference(self) -> str:
        """How views name the contrasts' difference: "H − E", or "Δ geometry" for other geometry pairs."""
        return "H − E" if self.paper_geometries else "Δ geometry"

    def definition(self, contrast: str) -> str:
        """The arms a contrast compares (`H_S - E_S`)."""
        return next(iter(self.contrasts[contrast].values())).definition

    def to_json(self) -> dict:
        """Per contrast and level, the per-seed H − E values and their summary, and the pattern."""
        return {
            "metric": self.metric,
            "n_seeds": self.n_seeds,
            "contrasts": {
                c: {
                    "levels": {
                        level: {
                            "per_seed": {str(s): v for s, v in e.per_unit.items()},
                            "mean": e.mean,
                            "sd": e.sd,
                            **e.evidence.columns(),
                        }
                        for level, e in by_level.items()
                    },
                    "pattern": self.pattern[c],
                    "seeds_with_pattern": self.seeds_with_pattern[c],
                }
                for c, by_level in self.contrasts.items()
            },
        }



def can_redistribute(per_seed: pl.DataFrame) -> bool:
    """Whether the table holds the arms of at least one redistribution contrast."""
    arms = {a for a in map(try_arm, per_seed["arm"].to_list()) if a is not None} if "arm" in per_seed.columns else set()
    factorial = Factorial.spanned(arms)
    return any(factorial.contrasts[c].arms <= arms for c in factorial.redistribution_contrasts)


def _level_columns(per_seed: pl.DataFrame, metric: str, levels: LevelsLike | None, source: str) -> dict[str, str]:
    """level -> column ``{level}_{metric}`` of every level (default: the table's, :func:`table_levels`),
    each required."""
    codes = table_levels(per_seed.columns) if levels is None else codes_of(levels)
    columns = {level: f"{level}_{metric}" for level in codes}
    missing = [c for c in columns.values() if c not in per_seed.columns]
    if missing:
        raise InputError(
            source,
            [f"redistribution of {metric!r} needs column {c!r}" for c in missing],
            hint=f"metric columns present: {', '.join(metric_columns(per_seed)) or '(none)'}",
        )
    return columns


def redistribution(
    per_seed: pl.DataFrame,
    metric: str = "mAP",
    *,
    source: str = DEFAULT_SOURCE,
    levels: LevelsLike | None = None,
) -> Redistribution:
    """H_S - E_S and H_R - E_R at every level for one metric (``mAP``, ``R@1``, ...).

    ``levels``: the study's levels, leaf first (default: those of the table's columns,
    :func:`~hierconsole.study.analysis.per_seed.table_levels`); each needs its column. ``pattern`` flags
    "finer levels down, highest level up": the mean below zero at every level under the top and above
    zero at the top (three levels: leaf and middle < 0, high > 0). A contrast whose arms the table lacks
    is left out; with neither, this is an InputError.
    """
    columns = _level_columns(per_seed, metric, levels, source)
    effects = simple_effects(per_seed, list(columns.values()), source=source)
    first = next(iter(columns.values()))
    factorial = Factorial.spanned(a for a in map(try_arm, per_seed["arm"].to_list()) if a is not None)
    available = [c for c in factorial.redistribution_contrasts if c in effects[first]]
    if not available:
        # Name what the table lacks in the factorial it spans (the paper's when it spans one geometry).
        wanted = factorial if len(factorial.geometries) > 1 else PAPER
        needed = " or ".join(wanted.effects[c] for c in wanted.redistribution_contrasts)
        raise InputError(source, f"redistribution needs the arms of {needed}; the table has only "
                         f"{', '.join(arms_present(per_seed['arm'].to_list()))}")
    contrasts = {c: {level: effects[col][c] for level, col in columns.items()} for c in available}
    pattern = {}
    seeds_with_pattern = {}
    for c, by_level in contrasts.items():
        *finer, top = by_level.values()
        pattern[c] = all(e.mean < 0 for e in finer) and top.mean > 0
        seeds_with_pattern[c] = sum(
            all(e.per_unit[s] < 0 for e in finer) and top.per_unit[s] > 0 for s in top.per_unit
        )
    n_seeds = next(iter(contrasts[available[0]].values())).n
    return Redistribution(
        metric=metric,
        contrasts=contrasts,
        pattern=pattern,
        seeds_with_pattern=seeds_with_pattern,
        n_seeds=n_seeds,
    )


def level_effects(
    per_seed: pl.DataFrame,
    metric: str = "mAP",
    *,
    source: str = DEFAULT_SOURCE,
    levels: LevelsLike | None = None,
) -> dict[str, dict[str, Effect]]:
    """The level-wise gains and losses of every simple effect the table's arms allow (geom_R, geom_S,
    loss_E, loss_H, the interaction for the paper's 2 × 2, in the factorial's order): effect -> level (leaf ... top) -> the
    Effect of column ``{level}_{metric}``. The redistribution is this for H - E, with its pattern."""
    columns = _level_columns(per_seed, metric, levels, source)
    effects = simple_effects(per_seed, list(columns.values()), source=source)
    first = next(iter(columns.values()))
    available = list(effects[first])
    if not available:
        raise InputError(source, f"no effect is computable from the arms "
                         f"{', '.join(arms_present(per_seed['arm'].to_list()))}")
    return {c: {level: effects[col][c] for level, col in columns.items()} for c in available}
