"""Effects pooled over studies (outer splits, family members): the study, not the seed, is the unit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

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
    definition: str


def pooled_effects(
    tables: Mapping[str, pl.DataFrame], metric: str = HIER_METRIC, *, sesoi: float | None = None
) -> dict[str, PooledEffect]:
    """The effects every study in `tables` (label -> per-seed table) can compute, pooled across studies
    (with a `sesoi`: each with its TOST and verdict over members).

    Within a study the effect is paired by seed and averaged over seeds; across studies nothing is paired
    (outer splits have different test sets), so only the study-level values are summarised.
    """
    per_study: dict[str, dict[str, float]] = {}
    definitions: dict[str, set[str]] = {}
    for label, table in tables.items():
        effects = simple_effects(table, metric, source=label)[metric]
        per_study[label] = {name: e.mean for name, e in effects.items()}
        for name, e in effects.items():
            definitions.setdefault(name, set()).add(e.definition)
    # A name is pooled where every study has it and means the same arms by it (`geom_R` is H_R - E_R in
    # one study and L_R - E_R in another that crosses Euclidean with Lorentz: never pooled).
    common = [
        n for n, texts in definitions.items()
        if len(texts) == 1 and all(n in values for values in per_study.values())
    ]
    return {
        name: PooledEffect(
            metric=metric,
            name=name,
            definition=next(iter(definitions[name])),
            per_unit={label: per_study[label][name] for label in tables},
            sesoi=sesoi,
        )
        for name in common
    }
