"""Per-seed tables, effects, redistribution and contrasts of a K-level study (issue 41), against plain loops.

The inputs are built in memory: a long metrics frame as the store holds it (one row per seed, arm,
perturbation, level and metric), with level codes from the data's level names.
"""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import polars as pl
import pytest

from hierconsole.errors import InputError
from hierconsole.levels import LevelPlan, Levels
from hierconsole.study.analysis.contrasts import contrast_tables, contrasts_frame, metric_columns
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.analysis.effects_view import effects_view
from hierconsole.study.analysis.frames import analysis_frame
from hierconsole.study.analysis.per_seed import (
    metric_order_for,
    per_perturbation_from_long,
    per_seed_from_long,
    split_column,
    table_levels,
)
from hierconsole.study.analysis.redistribution import level_effects, redistribution
from hierconsole.vocabulary import ARMS, CUB_LEVEL_NAMES

FIVE = Levels.of(("Species", "Genus", "Family", "Order", "Class"))
SEEDS = (42, 2024, 7)
PERTS = ("qg1", "qg2", "qg3")
METRICS = ("mAP", "R@1", "R@10")


def long_frame(levels: Levels, *, seed: int = 0, seeds=SEEDS, perts=PERTS, value=None) -> pl.DataFrame:
    """Stored metric rows of every arm, seed, perturbation, level and metric, with random values
    (or `value(arm, seed, pert, level, metric)`)."""
    rng = np.random.default_rng(seed)
    rows = []
    for a, s, p, level, metric in itertools.product(ARMS, seeds, perts, levels.codes, METRICS):
        v = float(rng.uniform()) if value is None else value(a, s, p, level, metric)
        rows.append(
            {"study_id": "st", "seed": s, "arm": a, "perturbation": p, "aggregation": "micro",
             "level": level, "metric": metric, "value": v}
        )  # fmt: skip
    return pl.DataFrame(rows)


def plain(long: pl.DataFrame) -> dict[tuple, float]:
    """(arm, seed, perturbation, level, metric) -> value."""
    return {(r["arm"], r["seed"], r["perturbation"], r["level"], r["metric"]): r["value"] for r in long.iter_rows(named=True)}


def test_level_codes_split_at_the_last_underscore_and_order_by_level():
    assert FIVE.codes == ("species", "genus", "family", "order", "class")
    assert split_column("order_R@10") == ("order", "R@10")
    assert split_column("hier_mAP") == ("hier", "mAP")
    columns = ["class_R@1", "zzz", "hier_mAP", "genus_mAP", "species_R@10", "species_mAP", "class_mAP", "species_R@1"]
    assert sorted(columns, key=metric_order_for(FIVE)) == [
        "species_mAP", "genus_mAP", "class_mAP", "hier_mAP", "species_R@1", "species_R@10", "class_R@1", "zzz",
    ]  # fmt: skip
    assert table_levels(["arm", "seed", "species_mAP", "genus_mAP", "hier_mAP", "genus_R@1"]) == ("species", "genus")
    # Three-level tables stay three-level, whatever columns they lack.
    assert table_levels(["leaf_mAP", "high_mAP"]) == ("leaf", "middle", "high")
    assert table_levels(["arm", "seed"]) == ("leaf", "middle", "high")


def test_five_level_per_perturbation_and_per_seed_tables_equal_plain_loops():
    long = long_frame(FIVE)
    values = plain(long)
    plan = LevelPlan.default(FIVE)
    table = per_perturbation_from_long(long, plan=plan)
    expected_columns = [
        *(f"{c}_mAP" for c in FIVE.codes),
        "hier_mAP",
        *(f"{c}_{m}" for c in FIVE.codes for m in ("R@1", "R@10")),
    ]
    assert table.columns == ["arm", "seed", "perturbation", *expected_columns]
    assert table.height == len(ARMS) * len(SEEDS) * len(PERTS)
    for row in table.iter_rows(named=True):
        key = (row["arm"], row["seed"], row["perturbation"])
        for c in FIVE.codes:
            for m in METRICS:
                assert row[f"{c}_{m}"] == values[(*key, c, m)]
        # hier: every level above the leaf, added one at a time in level order.
        total = 0.0
        for c in FIVE.codes[1:]:
            total += values[(*key, c, "mAP")]
        assert row["hier_mAP"] == total / 4

    wide = per_seed_from_long(long, plan=plan)
    assert wide.columns == ["arm", "seed", *expected_columns]
    for row in wide.iter_rows(named=True):
        for column in expected_columns:
            per_pert = table.filter((pl.col("arm") == row["arm"]) & (pl.col("seed") == row["seed"]))[column].to_list()
            assert row[column] == statistics.fmean(per_pert)


def test_hier_is_the_mean_of_the_declared_levels_only():
    long = long_frame(FIVE, seed=3)
    values = plain(long)
    plan = LevelPlan(FIVE, hier=("family", "class"), trained=FIVE.codes)
    table = per_perturbation_from_long(long, plan=plan)
    for row in table.iter_rows(named=True):
        key = (row["arm"], row["seed"], row["perturbation"])
        assert row["hier_mAP"] == (0.0 + values[(*key, "family", "mAP")] + values[(*key, "class", "mAP")]) / 2


def test_unknown_levels_are_named_with_the_study_levels():
    long = long_frame(FIVE)
    with pytest.raises(InputError, match=r"unknown level 'species' \(valid: leaf, middle, high\)"):
        per_seed_from_long(long)  # a five-level frame read as three-level
    with pytest.raises(ValueError, match="unknown level"):
        per_seed_from_long(long, plan=LevelPlan.default(FIVE), excluded=("middle",))


def test_three_level_plans_of_any_names_give_the_same_bits():
    three = Levels.of(CUB_LEVEL_NAMES)
    long = long_frame(three, seed=5)
    assert per_seed_from_long(long).equals(per_seed_from_long(long, plan=LevelPlan.default(three)))


def test_empty_level_four_of_six_is_left_out_and_hier_averages_the_rest():
    six = Levels.default(6)
    assert six.codes == ("level1", "level2", "level3", "level4", "level5", "level6")
    long = long_frame(six, seed=9)
    values = plain(long)
    fourth = six.codes[3]
    plan = LevelPlan.default(six)
    table = per_perturbation_from_long(long, plan=plan, excluded=(fourth,))
    assert not [c for c in table.columns if c.startswith(f"{fourth}_")]
    kept = [c for c in six.codes[1:] if c != fourth]
    for row in table.iter_rows(named=True):
        key = (row["arm"], row["seed"], row["perturbation"])
        total = 0.0
        for c in kept:
            total += values[(*key, c, "mAP")]
        assert row["hier_mAP"] == total / len(kept)
    wide = per_seed_from_long(long, plan=plan, excluded=(fourth,))
    # The other levels' effects are all there; the redistribution needs every level, so there is none.
    view = effects_view(wide, source="study st", levels=six)
    assert view.redistribution is None
    assert set(view.effects) >= {f"{c}_mAP" for c in six.codes if c != fourth} | {"hier_mAP"}
    assert view.levels == six.codes


def test_effects_and_intervals_per_level_and_for_hier_at_five_levels():
    wide = per_seed_from_long(long_frame(FIVE, seed=11), plan=LevelPlan.default(FIVE))
    effects = simple_effects(wide)
    for column in [*(f"{c}_mAP" for c in FIVE.codes), "hier_mAP"]:
        cell = {(r["arm"], r["seed"]): r[column] for r in wide.iter_rows(named=True)}
        for name, (plus, minus) in {"geom_R": ("H_R", "E_R"), "geom_S": ("H_S", "E_S"), "loss_E": ("E_S", "E_R")}.items():
            e = effects[column][name]
            diffs = [cell[(plus, s)] - cell[(minus, s)] for s in sorted(SEEDS)]
            assert [e.per_unit[s] for s in sorted(SEEDS)] == diffs
            assert e.mean == pytest.approx(statistics.fmean(diffs), abs=1e-15)
            assert e.sd == pytest.approx(statistics.stdev(diffs), abs=1e-15)
            lo, hi = e.evidence.ci95_t
            assert lo < e.mean < hi
    frame = analysis_frame("effects", wide)
    assert frame["metric"].unique(maintain_order=True).to_list()[:6] == [*(f"{c}_mAP" for c in FIVE.codes), "hier_mAP"]


def _signs_pattern(per_level: list[float]) -> bool:
    *finer, top = per_level
    return all(v < 0 for v in finer) and top > 0


@pytest.mark.parametrize("k", [2, 7])
def test_redistribution_of_k_levels_equals_a_plain_loop(k):
    levels = Levels.default(k)

    # H_S - E_S: below zero at every finer level and above at the top, on every seed; H_R - E_R: mixed.
    def value(arm, seed, pert, level, metric):
        i = levels.codes.index(level)
        base = 0.5 + 0.01 * i + 0.001 * SEEDS.index(seed) + 0.0001 * PERTS.index(pert)
        if arm == "H_S":
            return base + (0.05 if i == k - 1 else -0.03)
        if arm == "H_R":
            return base + (0.02 if i % 2 else -0.02) * (1 + SEEDS.index(seed))
        return base

    wide = per_seed_from_long(long_frame(levels, value=value), plan=LevelPlan.default(levels))
    result = redistribution(wide, levels=levels)
    assert list(result.contrasts) == ["geom_S", "geom_R"]
    cell = {(r["arm"], r["seed"]): r for r in wide.iter_rows(named=True)}
    for contrast, (plus, minus) in {"geom_S": ("H_S", "E_S"), "geom_R": ("H_R", "E_R")}.items():
        by_level = result.contrasts[contrast]
        assert list(by_level) == list(levels.codes)
        means = []
        for level in levels.codes:
            diffs = [cell[(plus, s)][f"{level}_mAP"] - cell[(minus, s)][f"{level}_mAP"] for s in sorted(SEEDS)]
            assert [by_level[level].per_unit[s] for s in sorted(SEEDS)] == diffs
            means.append(by_level[level].mean)
        assert result.pattern[contrast] == _signs_pattern(means)
        per_seed_patterns = sum(
            _signs_pattern([by_level[level].per_unit[s] for level in levels.codes]) for s in SEEDS
        )
        assert result.seeds_with_pattern[contrast] == per_seed_patterns
    assert result.pattern["geom_S"] and result.seeds_with_pattern["geom_S"] == len(SEEDS)
    # The levels inferred from the table's columns are the same.
    assert redistribution(wide).contrasts.keys() == result.contrasts.keys()
    assert list(redistribution(wide).contrasts["geom_S"]) == list(levels.codes)
    frame = analysis_frame("redistribution", wide)
    assert frame.height == 2 * k and frame["level"].to_list()[:k] == list(levels.codes)

    # Every simple effect, level by level.
    every = level_effects(wide, levels=levels)
    assert list(every) == ["geom_R", "geom_S", "loss_E", "loss_H", "interaction"]
    for level in levels.codes:
        diffs = [cell[("E_S", s)][f"{level}_mAP"] - cell[("E_R", s)][f"{level}_mAP"] for s in sorted(SEEDS)]
        assert [every["loss_E"][level].per_unit[s] for s in sorted(SEEDS)] == diffs


def test_contrast_of_two_five_level_studies_has_a_row_per_level_and_hier():
    plan = LevelPlan.default(FIVE)
    a = per_seed_from_long(long_frame(FIVE, seed=1), plan=plan)
    b = per_seed_from_long(long_frame(FIVE, seed=2), plan=plan)
    assert list(metric_columns("hier_mAP", FIVE)) == [*FIVE.codes, "hier"]
    c = contrast_tables(a, b, a="A", b="B", arms=[("H_S", "E_S")], levels=FIVE, excluded=("order",))
    assert [r.level for r in c.rows] == ["species", "genus", "family", "class", "hier"]
    for r in c.rows:
        column = "hier_mAP" if r.level == "hier" else f"{r.level}_mAP"
        va = dict(a.filter(pl.col("arm") == "H_S").select("seed", column).iter_rows())
        vb = dict(b.filter(pl.col("arm") == "E_S").select("seed", column).iter_rows())
        assert r.per_unit == {s: va[s] - vb[s] for s in SEEDS}
    frame = contrasts_frame([c])
    assert frame["metric"].to_list() == ["species_mAP", "genus_mAP", "family_mAP", "class_mAP", "hier_mAP"]
    assert [row["metric"] for row in c.to_json()["rows"]] == frame["metric"].to_list()
    assert not math.isnan(frame["mean"][0])
