"""The exportable tables: their catalogue, and the flat frames of the analysis results.

Every analysis table (arms, effects, recall, deviation, redistribution) is a function of a per-seed wide
table; the raw store tables come from `study/read/results.py`. The writers (`present/export.py`)
turn any of them into a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import polars as pl

from hierconsole.errors import HierconsoleError, InputError, NotFoundError
from hierconsole.factorial import arms_in_order
from hierconsole.levels import PAPER_CODES
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import Effect, SimpleEffects, iter_effects, seeds_of, simple_effects
from hierconsole.study.analysis.headline import headline, headline_frame
from hierconsole.study.analysis.paired import summary_schema
from hierconsole.study.analysis.per_seed import LevelsLike, codes_of, split_column, table_levels
from hierconsole.study.analysis.redistribution import Redistribution, redistribution
from hierconsole.vocabulary import HIER_METRIC, MAP

TABLES: dict[str, str] = {
    "runs": "one row per training run: study, seed, arm, state, timings and hashes",
    "metrics": "every stored metric value: run, seed, arm, Q/G perturbation, aggregation, level, metric",
    "arms": "per arm, mean ± SD over seeds of leaf, middle, high and hierarchy mAP (paper Table 1)",
    "effects": "simple effects geom_R, geom_S, loss_E, loss_H, interaction per metric, per seed and mean ± SD",
    "recall": "per arm and level, Recall@K mean ± SD over seeds (paper Table S8)",
    "deviation": "the cells then the baselines, each with leaf, middle and high mAP and Recall@K mean ± SD",
    "redistribution": "H_S - E_S and H_R - E_R per level, per seed, with the 'finer down, highest up' flag",
    "headline": "|loss effect| - |geometry effect| paired by seed, per metric, with intervals and tests",
    "variance": "per arm and metric, the between-seed and within-seed (Q/G) variance and the seeds' share",
    "audits": "fairness and leakage checks with their result and evidence",
    "tuning": "temperature tuning candidates per geometry with validation scores and the winner",
    "durations": "per arm of a study that selects its epoch: the frozen epoch and the seed-mean validation score",
}
"""Exportable table names and what each holds."""

FAMILY_TABLES: dict[str, str] = {
    "contrasts": "a family's declared contrasts: per arm pair and level, per seed, mean ± SD, positive seeds",
    "outer-arms": "an outer-split family's arms: per arm and mAP level, per split (mean over seeds), mean ± SD",
    "outer-gains": "an outer-split family's paired gains A - B: per split, mean ± SD, positive splits, tests",
}
"""Tables of a family (`export TABLE --family F`) rather than of one study."""

ANALYSIS_TABLES: tuple[str, ...] = ("arms", "effects", "recall", "deviation", "redistribution", "headline")
POSTHOC_TABLES: tuple[str, ...] = (*ANALYSIS_TABLES, "variance")
"""The tables computed from one aggregation's metrics, hence the ones a post-hoc re-score can report."""
"""Tables computed from a per-seed wide table (see :func:`analysis_frame`)."""


def listing(options: dict[str, str]) -> str:
    width = max(map(len, options))
    return "\n".join(f"    {name.ljust(width)}  {text}" for name, text in options.items())


def check_table(name: str) -> str:
    if name not in TABLES:
        raise NotFoundError(f"unknown table {name!r}; valid tables:\n{listing(TABLES)}")
    return name


def _seed_column(seed: int) -> str:
    return f"seed_{seed}"


def effects_frame(effects: SimpleEffects) -> pl.DataFrame:
    """One row per (metric, effect): definition, ``seed_<s>`` per seed, mean, sd, positive_seeds, n_seeds,
    then the intervals and tests (:data:`~hierconsole.study.analysis.statistics.EVIDENCE_KEYS`)."""
    seeds = seeds_of(effects)
    rows = []
    for e in iter_effects(effects):
        rows.append(
            {
                "metric": e.metric,
                "effect": e.name,
                "definition": e.definition,
                **{_seed_column(s): e.per_unit[s] for s in seeds},
                **e.columns(),
            }
        )
    schema = {
        "metric": pl.String,
        "effect": pl.String,
        "definition": pl.String,
        **{_seed_column(s): pl.Float64 for s in seeds},
        **summary_schema("seed"),
    }
    return pl.DataFrame(rows, schema=schema)


def map_metrics(levels: LevelsLike) -> tuple[str, ...]:
    """Every level's mAP column, leaf to top, then the hier score's."""
    return (*(f"{level}_{MAP}" for level in codes_of(levels)), HIER_METRIC)


MAP_METRICS: tuple[str, ...] = map_metrics(PAPER_CODES)
"""The mAP columns of a three-level study."""


def arms_frame(arm_long: pl.DataFrame, metrics: Sequence[str] | None = None) -> pl.DataFrame:
    """Paper Table 1 shape from :func:`~hierconsole.study.analysis.arms.arm_table`: arm, n, ``<metric>_mean/_sd``.

    Default metrics: the mAP columns (every level's, then hier) when present, otherwise all of them;
    Recall@K has its own table (:func:`recall_frame`).
    """
    available = list(dict.fromkeys(arm_long["metric"].to_list()))
    if metrics is None:
        metrics = [m for m in map_metrics(table_levels(available)) if m in available] or available
    rows = []
    for arm in arms_in_order(arm_long["arm"].to_list()):
        part = arm_long.filter(pl.col("arm") == arm)
        if part.is_empty():
            continue
        by_metric = {r["metric"]: r for r in part.iter_rows(named=True)}
        row: dict[str, object] = {"arm": arm, "n": _seeds_of(by_metric.values())}
        for m in metrics:
            r = by_metric.get(m)
            row[f"{m}_mean"] = None if r is None else r["mean"]
            row[f"{m}_sd"] = None if r is None else r["sd"]
        rows.append(row)
    schema = {"arm": pl.String, "n": pl.Int64}
    for m in metrics:
        schema |= {f"{m}_mean": pl.Float64, f"{m}_sd": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def deviation_frame(arm_long: pl.DataFrame) -> pl.DataFrame:
    """The baselines' deviation from the cells in one table: every arm (cells, then baselines) with each
    level's mAP and Recall@K, so that "finer down, coarser up" reads along a row."""
    available = set(arm_long["metric"].to_list())
    ks = sorted({int(m.partition("_R@")[2]) for m in available if m.partition("_R@")[2].isdigit()})
    metrics = [
        m
        for level in table_levels(available_in_order(arm_long))
        for m in (f"{level}_{MAP}", *(f"{level}_R@{k}" for k in ks))
        if m in available
    ]
    return arms_frame(arm_long, metrics)


def available_in_order(arm_long: pl.DataFrame) -> list[str]:
    """The metrics of an arm table, in the order they first appear (the per-seed table's column order)."""
    return list(dict.fromkeys(arm_long["metric"].to_list()))


def _seeds_of(rows: Iterable[dict]) -> int | None:
    """The n (seeds) of an arm's rows; None for a baseline arm, which has no training seed."""
    ns = [r["n"] for r in rows if r["n"] is not None]
    return max(ns) if ns else None


def recall_frame(arm_long: pl.DataFrame, *, source: str = "arm table") -> pl.DataFrame:
    """Paper Table S8 shape: arm, level, n, ``R@<k>_mean/_sd`` for each K found in ``<level>_R@<k>``."""
    codes = table_levels(available_in_order(arm_long))
    ks = sorted(
        {
            int(metric[2:])
            for level, metric in map(split_column, arm_long["metric"].to_list())
            if level in codes and metric.startswith("R@") and metric[2:].isdigit()
        }
    )
    if not ks:
        raise InputError(source, "no Recall@K metric columns (named like leaf_R@1)")
    rows = []
    for arm in arms_in_order(arm_long["arm"].to_list()):
        part = {r["metric"]: r for r in arm_long.filter(pl.col("arm") == arm).iter_rows(named=True)}
        for level in codes:
            found = {k: part.get(f"{level}_R@{k}") for k in ks}
            if not any(found.values()):
                continue
            row: dict[str, object] = {
                "arm": arm,
                "level": level,
                "n": _seeds_of(r for r in found.values() if r),
            }
            for k, r in found.items():
                row[f"R@{k}_mean"] = None if r is None else r["mean"]
                row[f"R@{k}_sd"] = None if r is None else r["sd"]
            rows.append(row)
    schema = {"arm": pl.String, "level": pl.String, "n": pl.Int64}
    for k in ks:
        schema |= {f"R@{k}_mean": pl.Float64, f"R@{k}_sd": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def redistribution_frame(result: Redistribution) -> pl.DataFrame:
    """One row per (contrast, level): seed values, mean, sd, positive_seeds, n_seeds, pattern flag."""
    seeds = sorted(next(iter(next(iter(result.contrasts.values())).values())).per_unit)
    rows = []
    for contrast, by_level in result.contrasts.items():
        for level, e in by_level.items():
            rows.append(_redistribution_row(result, contrast, level, e, seeds))
    schema = {
        "contrast": pl.String,
        "definition": pl.String,
        "level": pl.String,
        "metric": pl.String,
        **{_seed_column(s): pl.Float64 for s in seeds},
        **summary_schema("seed"),
        "pattern": pl.Boolean,
        "seeds_with_pattern": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


def _redistribution_row(
    result: Redistribution, contrast: str, level: str, e: Effect, seeds: list[int]
) -> dict:
    return {
        "contrast": contrast,
        "definition": e.definition,
        "level": level,
        "metric": result.metric,
        **{_seed_column(s): e.per_unit[s] for s in seeds},
        **e.columns(),
        "pattern": result.pattern[contrast],
        "seeds_with_pattern": result.seeds_with_pattern[contrast],
    }


def analysis_frame(
    name: str,
    per_seed: pl.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    source: str = "per-seed table",
    baselines: pl.DataFrame | None = None,
    levels: LevelsLike | None = None,
) -> pl.DataFrame:
    """The exportable frame of an analysis table (:data:`ANALYSIS_TABLES`) from a per-seed wide table.

    ``redistribution`` uses mAP; ``metrics`` narrows arms, effects and the headline comparisons.
    ``baselines`` (the study's baseline arms, `effects.baselines_from_long`) adds their rows to arms and
    recall and their contrasts to effects. ``levels``: the study's (default: those of the table's columns).
    """
    if name == "effects":
        return effects_frame(simple_effects(per_seed, metrics, source=source, baselines=baselines))
    if name == "arms":
        return arms_frame(arm_table(per_seed, metrics, source=source, baselines=baselines), metrics)
    if name == "recall":
        return recall_frame(arm_table(per_seed, metrics, source=source, baselines=baselines), source=source)
    if name == "deviation":
        return deviation_frame(arm_table(per_seed, None, source=source, baselines=baselines))
    if name == "redistribution":
        return redistribution_frame(redistribution(per_seed, "mAP", source=source, levels=levels))
    if name == "headline":
        effects = simple_effects(per_seed, metrics, source=source)
        return headline_frame([h for metric in effects for h in headline(effects, metric)])
    check_table(name)
    raise HierconsoleError(
        f"table {name!r} comes from the study store, not from a per-seed table\n"
        f"  fix: tables computable from a CSV are {', '.join(ANALYSIS_TABLES)}"
    )
