"""Effects pooled over studies (outer splits, family members): the study, not the seed, is the unit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from hierconsole.factorial import CONTRASTS, EFFECTS
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.analysis.statistics import Evidence, evidence, mean_sd
from hierconsole.vocabulary import HIER_METRIC


@dataclass(frozen=True)
class PooledEffect:
    """One effect with the study (an outer split, a family member) as the unit: each study's value is its
    effect averaged over its seeds; the summary is over studies (sample SD, positive studies)."""

    metric: str
    name: str
    per_study: dict[str, float]
    mean: float
    sd: float | None
    positive: int
    n: int
    evidence: Evidence
    """Intervals and tests with the study as the unit (`seeds_to_resolve` then counts studies)."""

    @property
    def definition(self) -> str:
        return EFFECTS[self.name]


def pooled_effects(tables: Mapping[str, pl.DataFrame], metric: str = HIER_METRIC) -> dict[str, PooledEffect]:
    """The effects every study in `tables` (label -> per-seed table) can compute, pooled across studies.

    Within a study the effect is paired by seed and averaged over seeds; across studies nothing is paired
    (outer splits have different test sets), so only the study-level values are summarised.
    """
    per_study: dict[str, dict[str, float]] = {}
    for label, table in tables.items():
        effects = simple_effects(table, metric, source=label)[metric]
        per_study[label] = {name: e.mean for name, e in effects.items()}
    common = [n for n in CONTRASTS if all(n in values for values in per_study.values())]
    out = {}
    for name in common:
        values = {label: per_study[label][name] for label in tables}
        mean, sd = mean_sd(list(values.values()))
        out[name] = PooledEffect(
            metric=metric,
            name=name,
            per_study=values,
            mean=mean,
            sd=sd,
            positive=sum(v > 0 for v in values.values()),
            n=len(values),
            evidence=evidence(list(values.values())),
        )
    return out
