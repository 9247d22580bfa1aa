"""Arms over outer splits (paper Sec. 5.5): each arm's value on a split is its mean over that split's
training seeds; arms are summarised as mean ± sample SD over splits, and the declared gains A - B are
paired by split (the outer split, not the seed, is the unit: splits have different test sets)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from hierconsole.errors import HierconsoleError
from hierconsole.study.analysis.frames import MAP_METRICS
from hierconsole.study.analysis.paired import PairedSummary, summary_schema

UNIT = "outer split"
SPLIT = "split"
"""The unit's kind in keys: `per_split`, `positive_splits`, `n_splits`."""


@dataclass(frozen=True, kw_only=True)
class ArmSummary(PairedSummary[str]):
    """One arm and metric: the value on each split (`per_unit`: its mean over the split's seeds), then
    mean ± SD over splits."""

    unit: str = SPLIT
    name: str
    label: str
    arm: str
    configuration: str | None
    metric: str
    seeds: dict[str, int]
    """Rows averaged on each split: training seeds, or 1 for a seed-independent baseline."""


@dataclass(frozen=True, kw_only=True)
class GainSummary(PairedSummary[str]):
    """A - B on every split (`per_unit`), then mean ± SD over splits and the splits where it is positive."""

    unit: str = SPLIT
    name: str
    a: str
    b: str
    metric: str


@dataclass(frozen=True)
class OuterArmsView:
    family: str
    splits: tuple[str, ...]
    metrics: tuple[str, ...]
    arms: tuple[ArmSummary, ...]
    """Arm by arm in the family's order, each with every metric."""
    gains: tuple[GainSummary, ...]
    omitted: tuple[str, ...]
    """Metrics left out because some arm on some split lacks them (a level without valid queries)."""

    def arm(self, name: str, metric: str) -> ArmSummary:
        return next(a for a in self.arms if a.name == name and a.metric == metric)

    def to_json(self) -> dict[str, Any]:
        arms: dict[str, dict[str, Any]] = {}
        for a in self.arms:
            entry = arms.setdefault(
                a.name, {"label": a.label, "arm": a.arm, "configuration": a.configuration, "metrics": {}}
            )
            entry["metrics"][a.metric] = {
                "per_split": a.per_unit,
                "seeds": a.seeds,
                "mean": a.mean,
                "sd": a.sd,
                "n_splits": a.n,
            }
        gains: dict[str, dict[str, Any]] = {}
        for g in self.gains:
            entry = gains.setdefault(g.name, {"a": g.a, "b": g.b, "metrics": {}})
            entry["metrics"][g.metric] = g.to_json()
        return {
            "family": self.family,
            "unit": UNIT,
            "splits": list(self.splits),
            "metrics": list(self.metrics),
            "arms": arms,
            "gains": gains,
            "omitted": list(self.omitted),
        }


def _arm_rows(table: pl.DataFrame, arm: str, member: str, family: str) -> pl.DataFrame:
    rows = table.filter(pl.col("arm") == arm)
    if rows.is_empty():
        found = sorted(set(table["arm"].to_list()))
        raise HierconsoleError(
            f"family {family}: member {member} has no results for arm {arm} (it has {', '.join(found) or 'none'}); "
            "each declared arm must be trained or scored by its configuration's studies"
        )
    return rows


def outer_arms_view(
    family: str, outer: Mapping[str, Any], tables: Mapping[str, pl.DataFrame], metrics: Sequence[str] = MAP_METRICS
) -> OuterArmsView:
    """The arms and gains of an outer-split family from each member's results (`tables`: member ->
    rows of arm, seed and metric columns, Q/G perturbations already averaged; cells and baselines alike)."""
    splits = tuple(outer["splits"])
    members = {(s, c): m for m, (s, c) in outer["members"].items()}
    # (arm name, split) -> the arm's rows on that split
    rows = {
        (a["name"], s): _arm_rows(tables[members[(s, a["configuration"])]], a["arm"], members[(s, a["configuration"])], family)
        for a in outer["arms"]
        for s in splits
    }
    usable = [m for m in metrics if all(m in r.columns and r[m].null_count() == 0 for r in rows.values())]
    omitted = tuple(m for m in metrics if m not in usable)
    arms: list[ArmSummary] = []
    values: dict[tuple[str, str], dict[str, float]] = {}
    for a in outer["arms"]:
        for metric in usable:
            per_split = {s: statistics.fmean(rows[(a["name"], s)][metric].to_list()) for s in splits}
            values[(a["name"], metric)] = per_split
            arms.append(
                ArmSummary(
                    name=a["name"],
                    label=a["label"],
                    arm=a["arm"],
                    configuration=a["configuration"],
                    metric=metric,
                    per_unit=per_split,
                    seeds={s: rows[(a["name"], s)].height for s in splits},
                )
            )
    gains: list[GainSummary] = []
    for g in outer["gains"]:
        for metric in usable:
            a_values, b_values = values[(g["a"], metric)], values[(g["b"], metric)]
            per_split = {s: a_values[s] - b_values[s] for s in splits}
            gains.append(GainSummary(name=g["name"], a=g["a"], b=g["b"], metric=metric, per_unit=per_split))
    return OuterArmsView(family, splits, tuple(usable), tuple(arms), tuple(gains), omitted)


def outer_arms_frame(view: OuterArmsView) -> pl.DataFrame:
    """One row per (arm, metric): name, label, arm, configuration, metric, one column per split, mean, sd."""
    rows = [
        {
            "name": a.name,
            "label": a.label,
            "arm": a.arm,
            "configuration": a.configuration,
            "metric": a.metric,
            **{s: a.per_unit[s] for s in view.splits},
            "mean": a.mean,
            "sd": a.sd,
            "n_splits": a.n,
        }
        for a in view.arms
    ]
    schema = {
        "name": pl.String,
        "label": pl.String,
        "arm": pl.String,
        "configuration": pl.String,
        "metric": pl.String,
        **{s: pl.Float64 for s in view.splits},
        "mean": pl.Float64,
        "sd": pl.Float64,
        "n_splits": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


def outer_gains_frame(view: OuterArmsView) -> pl.DataFrame:
    """One row per (gain, metric): name, a, b, metric, one column per split, mean, sd, positive splits,
    then the intervals and tests with the split as the unit."""
    rows = [
        {
            "gain": g.name,
            "a": g.a,
            "b": g.b,
            "metric": g.metric,
            **{s: g.per_unit[s] for s in view.splits},
            **g.columns(),
        }
        for g in view.gains
    ]
    schema = {
        "gain": pl.String,
        "a": pl.String,
        "b": pl.String,
        "metric": pl.String,
        **{s: pl.Float64 for s in view.splits},
        **summary_schema(SPLIT),
    }
    return pl.DataFrame(rows, schema=schema)
