"""Contrasts across studies: metric(A, arm_a, seed) - metric(B, arm_b, seed), paired by training seed.

The within-study effects (`study.analysis.effects`) compare arms of one study; the paper's controls compare
studies (Full - Shuffled supervision, Base - Near-flat curvature, ...). Both use the same unit, the
training seed, with the Q/G perturbations averaged within the seed first, and the same summary
(`study.analysis.paired`).

Pure computation over two per-seed wide tables lives here; `study.read.contrasts.compare_studies` adds
the store-side refusals (different datasets, different query/gallery protocols, unlocked studies).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from hierconsole.errors import HierconsoleError
from hierconsole.levels import PAPER_CODES, WHOLE_TREE
from hierconsole.metrics.names import whole_tree_metric
from hierconsole.study.analysis.paired import PairedSummary, summary_schema
from hierconsole.study.analysis.per_seed import LevelsLike, arms_present, codes_of, normalize_arm
from hierconsole.study.analysis.statistics import adjusted, p_signflip
from hierconsole.vocabulary import HIER_METRIC, HIER_SCORE, MAP, RANKING_METRICS

DEFAULT_METRIC = HIER_METRIC


@dataclass(frozen=True, kw_only=True)
class ContrastRow(PairedSummary[int]):
    """metric(A, arm_a, seed) - metric(B, arm_b, seed) at one level (`per_unit`: seed -> difference)."""

    arm_a: str
    arm_b: str
    level: str


@dataclass(frozen=True)
class StudyContrast:
    """One A - B comparison: a row per (arm pair, level)."""

    metric: str
    a: str
    b: str
    rows: list[ContrastRow]
    dropped: dict[str, list[int]] = field(default_factory=dict)
    """"a" / "b" -> training seeds present in that study only, left out of every pair."""
    name: str | None = None
    """The contrast's name when a family declares it."""
    levels: tuple[str, ...] = PAPER_CODES
    """The studies' level codes, leaf first."""

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of `hierconsole contrast --json` (seeds as strings, sd null under two seeds); each
        row names the column it compares (`leaf_mAP`, ..., `hier_mAP`), `metric` what was asked for."""
        columns = metric_columns(self.metric, self.levels)
        return {
            "metric": self.metric,
            "a": self.a,
            "b": self.b,
            "rows": [
                {
                    "arm_a": r.arm_a,
                    "arm_b": r.arm_b,
                    "level": r.level,
                    "metric": columns[r.level],
                    **r.to_json(),
                }
                for r in self.rows
            ],
        }

    def dropped_text(self) -> str | None:
        parts = [
            f"seed(s) {', '.join(map(str, seeds))} only in {self.a if side == 'a' else self.b}"
            for side, seeds in self.dropped.items()
            if seeds
        ]
        return "dropped " + "; ".join(parts) if parts else None


def metric_columns(metric: str, levels: LevelsLike = PAPER_CODES) -> dict[str, str]:
    """level -> per-seed column for a contrast of `metric` (`hier_mAP`/`mAP`: every level and hier;
    `R@K`: every level), over the studies' `levels` (default: leaf, middle, high)."""
    if whole_tree_metric(metric):  # one row: the whole tree's
        return {WHOLE_TREE: metric}
    base = contrast_measure(metric)
    codes = codes_of(levels)
    if base not in RANKING_METRICS:
        raise HierconsoleError(
            f"--metric {metric!r} is not a contrast metric\n  fix: use one of "
            f"{', '.join([HIER_METRIC, *RANKING_METRICS[1:]])} (levels are always {', '.join(codes)}"
            f"{', hier' if base == MAP else ''}), or a metric of the whole tree the studies score (H-AP, "
            "ASI, NDCG@K, mistake_severity@K, CPCC)"
        )
    columns = {level: f"{level}_{base}" for level in codes}
    if base == MAP:
        columns[HIER_SCORE] = HIER_METRIC
    return columns


def contrast_measure(metric: str) -> str:
    """The measure a contrast of `metric` compares at each level: `mAP` (with the hier score) or `R@K`."""
    return MAP if metric in (HIER_METRIC, MAP) else metric


def contrast_caption(metric: str) -> str:
    """What the rows of a contrast of `metric` are: "mAP per level and the hier score" or "R@5 per level"."""
    if whole_tree_metric(metric):
        return f"{metric} of the whole tree"
    base = contrast_measure(metric)
    return f"{base} per level" + (" and the hier score" if base == MAP else "")


def parse_arm_pair(text: str) -> tuple[str, str]:
    """`E_S:E_S`, `HR:ER` -> a normalised (arm_a, arm_b) pair."""
    left, sep, right = text.partition(":")
    if not sep or not left.strip() or not right.strip():
        raise HierconsoleError(f"--arms {text!r}: expected ARM_A:ARM_B, e.g. --arms H_R:E_R")
    return normalize_arm(left, source="--arms"), normalize_arm(right, source="--arms")


def _values(table: pl.DataFrame, arm: str, column: str) -> dict[int, float]:
    rows = table.filter(pl.col("arm") == arm).select("seed", column).iter_rows()
    return {int(seed): float(value) for seed, value in rows if value is not None and math.isfinite(value)}


def contrast_tables(
    table_a: pl.DataFrame,
    table_b: pl.DataFrame,
    *,
    a: str,
    b: str,
    metric: str = DEFAULT_METRIC,
    arms: Sequence[tuple[str, str]] | None = None,
    name: str | None = None,
    excluded: Sequence[str] = (),
    levels: LevelsLike = PAPER_CODES,
) -> StudyContrast:
    """A - B from two per-seed wide tables (arm, seed, `<level>_<metric>` columns, Q/G averaged).

    `arms` lists (arm_a, arm_b) pairs; by default every arm present in both tables, with itself. Seeds
    are those present in both (the others are reported in `dropped`). `excluded` levels (no valid query
    in either study's splits) get no row; the other levels are contrasted. `levels`: the studies' level
    codes, leaf first (default: leaf, middle, high).
    """
    columns = {level: c for level, c in metric_columns(metric, levels).items() if level not in excluded}
    for label, table in ((a, table_a), (b, table_b)):
        missing = [c for c in columns.values() if c not in table.columns]
        if missing:
            raise HierconsoleError(f"{label} has no {', '.join(missing)} metrics to contrast")
    present_a = arms_present(table_a["arm"].to_list())
    present_b = arms_present(table_b["arm"].to_list())
    if arms is None:
        pairs = [(arm, arm) for arm in present_a if arm in present_b]
        if not pairs:
            raise HierconsoleError(
                f"{a} trains {', '.join(present_a)} and {b} trains {', '.join(present_b)}: no arm in both\n"
                "  fix: name the pair to compare with --arms ARM_A:ARM_B"
            )
    else:
        pairs = list(arms)
        for arm_a, arm_b in pairs:
            for label, arm, present in ((a, arm_a, present_a), (b, arm_b, present_b)):
                if arm not in present:
                    raise HierconsoleError(f"{label} has no arm {arm} (it trains {', '.join(present)})")
    seeds_a = set(table_a["seed"].to_list())
    seeds_b = set(table_b["seed"].to_list())
    rows = []
    for arm_a, arm_b in pairs:
        for level, column in columns.items():
            va, vb = _values(table_a, arm_a, column), _values(table_b, arm_b, column)
            seeds = sorted(set(va) & set(vb))
            if not seeds:
                raise HierconsoleError(
                    f"{a} ({arm_a}) and {b} ({arm_b}) share no training seed: seeds "
                    f"{sorted(va)} and {sorted(vb)}; contrasts are paired by seed"
                )
            rows.append(ContrastRow(arm_a=arm_a, arm_b=arm_b, level=level, per_unit={s: va[s] - vb[s] for s in seeds}))
    dropped = {"a": sorted(seeds_a - seeds_b), "b": sorted(seeds_b - seeds_a)}
    return StudyContrast(metric=metric, a=a, b=b, rows=rows, dropped=dropped, name=name, levels=codes_of(levels))



def as_one_family(contrasts: Sequence[StudyContrast], family: str, *, sesoi: float | None = None) -> list[StudyContrast]:
    """`contrasts` with every row (arm pair x level, of every contrast) tested in one multiplicity family
    named `family` (Holm, Benjamini-Hochberg over all of them) and, with a `sesoi`, its TOST and verdict."""
    # The test alone (not the row's whole evidence): every row is rebuilt below, its evidence then computed once.
    p = {(i, j): p_signflip(list(r.per_unit.values())) for i, c in enumerate(contrasts) for j, r in enumerate(c.rows)}
    adjustments = adjusted(p, family)
    return [
        replace(c, rows=[replace(r, adjusted=adjustments[(i, j)], sesoi=sesoi) for j, r in enumerate(c.rows)])
        for i, c in enumerate(contrasts)
    ]


def contrasts_frame(contrasts: Sequence[StudyContrast]) -> pl.DataFrame:
    """One row per (contrast, arm pair, level): `seed_<s>` per seed, mean, sd, positive_seeds, n_seeds and
    the evidence columns (:data:`EVIDENCE_KEYS`)."""
    seeds = sorted({s for c in contrasts for r in c.rows for s in r.per_unit})
    rows = [
        {
            "contrast": c.name or f"{c.a} - {c.b}",
            "a": c.a,
            "b": c.b,
            "arm_a": r.arm_a,
            "arm_b": r.arm_b,
            "level": r.level,
            "metric": metric_columns(c.metric, c.levels)[r.level],  # the column compared: leaf_mAP, ..., hier_mAP
            **{f"seed_{s}": r.per_unit.get(s) for s in seeds},
            **r.columns(),
        }
        for c in contrasts
        for r in c.rows
    ]
    schema = {
        "contrast": pl.String,
        "a": pl.String,
        "b": pl.String,
        "arm_a": pl.String,
        "arm_b": pl.String,
        "level": pl.String,
        "metric": pl.String,
        **{f"seed_{s}": pl.Float64 for s in seeds},
        **summary_schema("seed"),
    }
    return pl.DataFrame(rows, schema=schema)
