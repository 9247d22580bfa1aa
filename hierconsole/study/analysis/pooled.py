"""Effects pooled over studies (outer splits, family members): the study, not the seed, is the unit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from hierconsole.factorial import CONTRASTS, EFFECTS
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.analysis.paired import PairedSummary
from hierconsole.vocabulary import HIER_METRIC


@dataclass(frozen=True, kw_only=True)
class PooledEffect(PairedSummary[str]):
    """One effect with the member (an outer split, a family member: a study) as the unit: each member's
    value is its effect averaged over its seeds; the summary is over members (`seeds_to_resolve` then
    counts members)."""

    unit: str = "member"
    metric: str
    name: str

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
    return {
        name: PooledEffect(metric=metric, name=name, per_unit={label: per_study[label][name] for label in tables})
        for name in common
    }
