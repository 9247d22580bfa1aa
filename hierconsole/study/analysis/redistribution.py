"""Level-wise redistribution (paper §5.4): H_S - E_S and H_R - E_R of one metric at every level."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from hierconsole.errors import InputError
from hierconsole.factorial import CONTRASTS, EFFECTS, REDISTRIBUTION_CONTRASTS
from hierconsole.study.analysis.effects import Effect, simple_effects
from hierconsole.study.analysis.per_seed import DEFAULT_SOURCE, arms_present, metric_columns, try_arm
from hierconsole.vocabulary import LEVELS


@dataclass(frozen=True)
class Redistribution:
    """H_S - E_S and H_R - E_R of one metric at each level (paper §5.4)."""

    metric: str
    contrasts: dict[str, dict[str, Effect]]
    """contrast (geom_S, geom_R) -> level (leaf, middle, high) -> Effect of column ``{level}_{metric}``."""
    pattern: dict[str, bool]
    """contrast -> whether the means go down at leaf and middle and up at high."""
    seeds_with_pattern: dict[str, int]
    """contrast -> number of seeds showing that sign pattern on their own."""
    n_seeds: int

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
    arms = {try_arm(a) for a in per_seed["arm"].to_list()} if "arm" in per_seed.columns else set()
    return any(CONTRASTS[c].arms <= arms for c in REDISTRIBUTION_CONTRASTS)


def redistribution(
    per_seed: pl.DataFrame, metric: str = "mAP", *, source: str = DEFAULT_SOURCE
) -> Redistribution:
    """H_S - E_S and H_R - E_R at leaf, middle and high for one metric (``mAP``, ``R@1``, ...).

    ``pattern`` flags "finer levels down, highest level up": leaf and middle means < 0 and high mean > 0.
    A contrast whose arms the table lacks is left out; with neither, this is an InputError.
    """
    columns = {level: f"{level}_{metric}" for level in LEVELS}
    missing = [c for c in columns.values() if c not in per_seed.columns]
    if missing:
        raise InputError(
            source,
            [f"redistribution of {metric!r} needs column {c!r}" for c in missing],
            hint=f"metric columns present: {', '.join(metric_columns(per_seed)) or '(none)'}",
        )
    effects = simple_effects(per_seed, list(columns.values()), source=source)
    available = [c for c in REDISTRIBUTION_CONTRASTS if c in effects[columns[LEVELS[0]]]]
    if not available:
        needed = " or ".join(EFFECTS[c] for c in REDISTRIBUTION_CONTRASTS)
        raise InputError(source, f"redistribution needs the arms of {needed}; the table has only "
                         f"{', '.join(arms_present(per_seed['arm'].to_list()))}")
    contrasts = {c: {level: effects[col][c] for level, col in columns.items()} for c in available}
    pattern = {}
    seeds_with_pattern = {}
    for c, by_level in contrasts.items():
        leaf, middle, high = (by_level[level] for level in LEVELS)
        pattern[c] = leaf.mean < 0 and middle.mean < 0 and high.mean > 0
        seeds_with_pattern[c] = sum(
            leaf.per_unit[s] < 0 and middle.per_unit[s] < 0 and high.per_unit[s] > 0 for s in leaf.per_unit
        )
    n_seeds = next(iter(contrasts[available[0]].values())).n
    return Redistribution(
        metric=metric,
        contrasts=contrasts,
        pattern=pattern,
        seeds_with_pattern=seeds_with_pattern,
        n_seeds=n_seeds,
    )
