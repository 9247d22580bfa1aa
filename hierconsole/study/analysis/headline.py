"""The headline comparison as a computed statement: |loss effect| - |geometry effect|, paired by seed.

"The objective contrast is larger than the geometry contrast" (paper §5.2) is read from two effects' means;
here it is one per-seed quantity, |Δloss(s)| - |Δgeom(s)|, with the same intervals and tests as every
effect, with the training seed as the unit.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from hierconsole.factorial import headline_name, headline_pairs
from hierconsole.study.analysis.effects import SimpleEffects
from hierconsole.study.analysis.paired import PairedSummary, summary_schema
from hierconsole.vocabulary import HIER_METRIC


@dataclass(frozen=True, kw_only=True)
class Headline(PairedSummary[str]):
    """|loss| - |geometry| of one metric: per seed, summarised;
    `positive` counts the units where the objective contrast is the larger in magnitude."""

    metric: str
    loss: str
    geometry: str
    definition: str
    """|objective contrast| - |geometry contrast| as arms (`|E_S - E_R| - |H_R - E_R|`)."""

    @property
    def name(self) -> str:
        return headline_name(self.loss, self.geometry)

    def to_json(self, *, named: bool = False) -> dict:
        """The comparison's labels, then `per_unit`, mean, sd, `positive`, `n` and the evidence: the headline's
        keys name no unit."""
        labels = {"metric": self.metric, "name": self.name, "loss": self.loss, "geometry": self.geometry}
        return labels | super().to_json(named=named)


def _per_seed(effects: SimpleEffects, metric: str, loss: str, geometry: str) -> dict[int, float] | None:
    by_effect = effects.get(metric, {})
    if loss not in by_effect or geometry not in by_effect:
        return None
    lo, geo = by_effect[loss].per_unit, by_effect[geometry].per_unit
    return {s: abs(lo[s]) - abs(geo[s]) for s in sorted(lo)}


def headline(effects: SimpleEffects, metric: str = HIER_METRIC) -> list[Headline]:
    """Every headline pair of the factorial the effects span (each objective contrast against each geometry
    contrast, `Factorial.headline_pairs`) its effects allow, one metric, seeds as units."""
    by_effect = effects.get(metric, {})
    out = []
    for loss, geometry in headline_pairs(by_effect):
        values = _per_seed(effects, metric, loss, geometry)
        if values is not None:
            per_unit = {str(s): v for s, v in values.items()}
            definition = f"|{by_effect[loss].definition}| - |{by_effect[geometry].definition}|"
            out.append(Headline(metric=metric, loss=loss, geometry=geometry, definition=definition, per_unit=per_unit))
    return out


def headline_frame(rows: list[Headline]) -> pl.DataFrame:
    """One row per comparison: metric, comparison, definition, mean, sd, positive, n, the evidence columns."""
    schema = {"metric": pl.String, "comparison": pl.String, "definition": pl.String, **summary_schema(None)}
    return pl.DataFrame(
        [
            {"metric": h.metric, "comparison": h.name, "definition": h.definition, **h.columns(named=False)}
            for h in rows
        ],
        schema=schema,
    )
