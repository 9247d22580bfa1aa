"""Arm tables, simple effects, redistribution and per-seed tables, checked against the paper and loops."""

from __future__ import annotations

import itertools
import json
import math
import statistics

import numpy as np
import polars as pl
import pytest

from hierconsole.errors import InputError
from hierconsole.factorial import EFFECTS
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import effects_json, simple_effects
from hierconsole.study.analysis.per_seed import normalize_arm, per_seed_from_long
from hierconsole.study.analysis.redistribution import redistribution
from hierconsole.study.analysis.statistics import (
    EVIDENCE_KEYS,
    ci95_boot,
    ci95_t,
    p_signflip,
    seeds_to_resolve,
)
from hierconsole.study.read.per_seed_csv import load_effects_csv
from hierconsole.vocabulary import ARMS
from tests.paper_tables import SEEDS, per_seed_table
from tests.paper_tables import effects as effects_of


def reference_effects(rows: dict[tuple[str, int], float]) -> dict[str, list[float]]:
    """Effects written out by hand, one seed at a time."""
    seeds = sorted({s for _, s in rows})
    out: dict[str, list[float]] = {name: [] for name in EFFECTS}
    for s in seeds:
        er, hr, es, hs = (rows[(a, s)] for a in ("E_R", "H_R", "E_S", "H_S"))
        out["geom_R"].append(hr - er)
        out["geom_S"].append(hs - es)
        out["loss_E"].append(es - er)
        out["loss_H"].append(hs - hr)
        out["interaction"].append((hs - es) - (hr - er))
    return out


# ------------------------------------------------------------------------------------------- arms


@pytest.mark.parametrize(
    ("text", "arm"),
    [
        ("ER", "E_R"),
        ("er", "E_R"),
        ("E_R", "E_R"),
        ("e-r", "E_R"),
        (" hs ", "H_S"),
        ("H_S", "H_S"),
        ("Es", "E_S"),
    ],
)
def test_normalize_arm_accepts_spellings(text, arm):
    assert normalize_arm(text) == arm


@pytest.mark.parametrize("text", ["EX", "", "E_RR", "R_E", "HR1", "euclid"])
def test_normalize_arm_rejects_others(text):
    with pytest.raises(InputError, match="unknown arm"):
        normalize_arm(text)


def test_arm_table_matches_paper_table1_and_loops():
    table = arm_table(per_seed_table("S3"))
    assert table.columns == ["arm", "metric", "mean", "sd", "n"]
    assert table["arm"].unique(maintain_order=True).to_list() == list(ARMS)
    got = {(r["arm"], r["metric"]): r for r in table.iter_rows(named=True)}
    # Paper Table 1, CUB rows (4 decimals).
    paper = {
        ("E_R", "leaf_mAP"): (0.6171, 0.0028),
        ("H_R", "middle_mAP"): (0.5153, 0.0029),
        ("E_S", "high_mAP"): (0.6121, 0.0007),
        ("H_S", "hier_mAP"): (0.5830, 0.0009),
        ("E_R", "hier_mAP"): (0.5314, 0.0013),
    }
    for key, (mean, sd) in paper.items():
        assert round(got[key]["mean"], 4) == pytest.approx(mean, abs=1e-12)
        assert round(got[key]["sd"], 4) == pytest.approx(sd, abs=1e-12)
    cub = per_seed_table("S3")
    for arm, metric in itertools.product(ARMS, ["leaf_mAP", "middle_mAP", "high_mAP", "hier_mAP"]):
        values = cub.filter(pl.col("arm") == arm)[metric].to_numpy()
        assert got[(arm, metric)]["mean"] == pytest.approx(values.mean(), abs=1e-15)
        assert got[(arm, metric)]["sd"] == pytest.approx(values.std(ddof=1), abs=1e-15)
        assert got[(arm, metric)]["n"] == 3


def test_arm_table_one_seed_has_null_sd_and_partial_arms_are_fine():
    df = pl.DataFrame({"arm": ["E_R", "E_R", "H_S"], "seed": [1, 2, 1], "x": [0.5, 0.7, 0.9]})
    table = arm_table(df)
    rows = {r["arm"]: r for r in table.iter_rows(named=True)}
    assert set(rows) == {"E_R", "H_S"}
    assert rows["H_S"]["sd"] is None and rows["H_S"]["n"] == 1 and rows["H_S"]["mean"] == 0.9
    assert rows["E_R"]["sd"] == pytest.approx(math.sqrt(0.02))


# ---------------------------------------------------------------------------------------- effects


def test_effects_reproduce_paper_table_s4():
    measured = simple_effects(per_seed_table("S3"), "hier_mAP")
    assert list(measured) == ["hier_mAP"]
    assert list(measured["hier_mAP"]) == list(EFFECTS)
    for name, paper in effects_of("S4").items():
        e = measured["hier_mAP"][name]
        assert list(e.per_unit) == list(SEEDS)
        # Table values are rounded to 6 decimals, so differences of them carry up to ~2e-6 of rounding.
        for s in SEEDS:
            assert e.per_unit[s] == pytest.approx(paper[f"seed_{s}"], abs=2.1e-6)
        assert e.mean == pytest.approx(paper["mean"], abs=2e-6)
        assert e.sd == pytest.approx(paper["sd"], abs=2e-6)
        assert e.n == 3
        assert e.positive == (0 if name == "interaction" else 3)


def test_effects_reproduce_paper_table_s11_from_constructed_arms():
    # Choose E_R per seed freely, then H_R = E_R + geom_R, E_S = E_R + loss_E, H_S = E_S + geom_S;
    # loss_H and the interaction then follow and must match the paper's rows.
    base = {42: 0.5012, 2024: 0.4987, 3407: 0.5033}
    s11 = effects_of("S11")
    rows = []
    for s in SEEDS:
        er = base[s]
        hr = er + s11["geom_R"][f"seed_{s}"]
        es = er + s11["loss_E"][f"seed_{s}"]
        hs = es + s11["geom_S"][f"seed_{s}"]
        rows += [("ER", s, er), ("HR", s, hr), ("ES", s, es), ("HS", s, hs)]
    df = pl.DataFrame(rows, schema=["arm", "seed", "hier_mAP"], orient="row")
    effects = simple_effects(df)["hier_mAP"]
    for name, paper in s11.items():
        # The three chosen contrasts come back exactly; the two derived ones carry the table's rounding.
        tol = 1e-12 if name in ("geom_R", "geom_S", "loss_E") else 2e-6
        for s in SEEDS:
            assert effects[name].per_unit[s] == pytest.approx(paper[f"seed_{s}"], abs=tol)
        assert effects[name].mean == pytest.approx(paper["mean"], abs=1e-6)
        assert effects[name].sd == pytest.approx(paper["sd"], abs=1e-6)
    assert effects["interaction"].positive == 0
    assert effects["loss_H"].positive == 3


def test_effects_match_loop_reference_on_random_table():
    rng = np.random.default_rng(7)
    seeds = [3, 11, 5, 8]
    rows = {(a, s): float(rng.normal()) for a in ARMS for s in seeds}
    order = list(rows.items())
    rng.shuffle(order)  # row order must not matter
    df = pl.DataFrame(
        {"arm": [a for (a, _), _ in order], "seed": [s for (_, s), _ in order], "m": [v for _, v in order]}
    )
    effects = simple_effects(df)["m"]
    ref = reference_effects(rows)
    for name, values in ref.items():
        e = effects[name]
        assert list(e.per_unit) == sorted(seeds)
        assert list(e.per_unit.values()) == pytest.approx(values, abs=0)
        assert e.mean == pytest.approx(statistics.mean(values), abs=1e-15)
        assert e.sd == pytest.approx(float(np.std(values, ddof=1)), abs=1e-15)
        assert e.positive == sum(v > 0 for v in values)


def test_effects_json_shape_is_exact():
    effects = simple_effects(per_seed_table("S3"), ["hier_mAP", "leaf_mAP"])
    doc = effects_json(effects)
    assert list(doc) == ["hier_mAP", "leaf_mAP"]
    for by_effect in doc.values():
        assert list(by_effect) == ["geom_R", "geom_S", "loss_E", "loss_H", "interaction"]
        for entry in by_effect.values():
            assert list(entry) == ["definition", "per_seed", "mean", "sd", "positive_seeds", "n_seeds", *EVIDENCE_KEYS]
            assert list(entry["per_seed"]) == ["42", "2024", "3407"]
    entry = doc["hier_mAP"]["geom_R"]
    assert entry["per_seed"]["42"] == pytest.approx(0.542911 - 0.532472, abs=1e-15)
    assert entry["n_seeds"] == 3 and entry["positive_seeds"] == 3
    assert json.loads(json.dumps(doc)) == doc


def test_one_seed_gives_null_sd():
    df = pl.DataFrame({"arm": list(ARMS), "seed": [1] * 4, "m": [0.1, 0.2, 0.4, 0.8]})
    e = simple_effects(df)["m"]["interaction"]
    assert e.per_unit == {1: pytest.approx((0.8 - 0.4) - (0.2 - 0.1))}
    assert e.sd is None
    assert effects_json(simple_effects(df))["m"]["interaction"]["sd"] is None
    # One seed: no interval, no bootstrap, no seeds_to_resolve; the sign-flip p of one value is 1.
    row = effects_json(simple_effects(df))["m"]["interaction"]
    assert row["ci95_t_lo"] is None and row["ci95_boot_hi"] is None and row["seeds_to_resolve"] is None
    assert row["p_signflip"] == 1.0


def test_every_effect_carries_the_statistics_of_its_per_seed_values():
    effects = simple_effects(per_seed_table("S3"))
    for by_effect in effects.values():
        for e in by_effect.values():
            values = [e.per_unit[s] for s in SEEDS]
            assert e.evidence.ci95_t == ci95_t(values)
            assert e.evidence.ci95_boot == ci95_boot(values)
            assert e.evidence.p_signflip == p_signflip(values)
            assert e.evidence.seeds_to_resolve == seeds_to_resolve(values)
            assert e.evidence.ci95_boot_seed is None  # three seeds: every resample enumerated
    # Paper supplement Table 4 (Sec. S7), CUB hier_mAP: all four simple effects are positive in all three seeds, so the exact
    # sign-flip p is its floor for three seeds, 2/8, and their t intervals exclude zero.
    for name in ("geom_R", "geom_S", "loss_E", "loss_H"):
        e = effects["hier_mAP"][name]
        assert e.evidence.p_signflip == 0.25
        assert e.evidence.resolved and e.evidence.seeds_to_resolve <= 3


# ---------------------------------------------------------------------------------- effect errors


def _without(df: pl.DataFrame, arm: str, seed: int) -> pl.DataFrame:
    return df.filter(~((pl.col("arm") == arm) & (pl.col("seed") == seed)))


def test_missing_cell_is_an_error_naming_seed_and_arm():
    df = _without(per_seed_table("S3"), "H_S", 2024)
    with pytest.raises(InputError) as err:
        simple_effects(df)
    text = str(err.value)
    assert "seed 2024 lacks arm(s) H_S" in text
    assert "seed 42" not in text


def test_seed_in_only_some_arms_is_an_error():
    extra = pl.DataFrame(
        {
            "arm": ["E_R", "H_R"],
            "seed": [99, 99],
            "leaf_mAP": [0.1, 0.2],
            "middle_mAP": [0.1, 0.2],
            "high_mAP": [0.1, 0.2],
            "hier_mAP": [0.1, 0.2],
        }
    )
    with pytest.raises(InputError, match=r"seed 99 lacks arm\(s\) E_S, H_S \(present: E_R, H_R\)"):
        simple_effects(pl.concat([per_seed_table("S3"), extra]))


def test_duplicate_arm_seed_is_an_error():
    df = pl.concat([per_seed_table("S3"), per_seed_table("S3").head(1)])
    with pytest.raises(InputError, match="duplicate row for arm E_R, seed 42"):
        simple_effects(df)
    with pytest.raises(InputError, match="duplicate"):
        arm_table(df)


def test_unknown_arm_and_bad_values_are_errors_not_nan():
    df = per_seed_table("S3").with_columns(
        pl.when(pl.col("seed") == 3407).then(pl.lit("X_Q")).otherwise(pl.col("arm")).alias("arm")
    )
    with pytest.raises(InputError, match="unknown arm 'X_Q'"):
        simple_effects(df)
    nan = per_seed_table("S3").with_columns(
        pl.when((pl.col("arm") == "H_R") & (pl.col("seed") == 42))
        .then(float("nan"))
        .otherwise(pl.col("leaf_mAP"))
        .alias("leaf_mAP")
    )
    with pytest.raises(InputError, match="arm H_R, seed 42: metric 'leaf_mAP' is nan"):
        simple_effects(nan)
    null = per_seed_table("S3").with_columns(
        pl.when(pl.col("arm") == "E_S").then(None).otherwise(pl.col("high_mAP")).alias("high_mAP")
    )
    with pytest.raises(InputError, match="arm E_S, seed 2024: metric 'high_mAP' is missing"):
        simple_effects(null)


def test_metric_selection_errors_list_valid_columns():
    df = per_seed_table("S3").with_columns(pl.lit("cub").alias("dataset"))
    with pytest.raises(InputError) as err:
        simple_effects(df, "genus_mAP")
    assert "'genus_mAP' does not exist" in str(err.value)
    assert "valid metric columns: leaf_mAP, middle_mAP, high_mAP, hier_mAP" in str(err.value)
    with pytest.raises(InputError, match="'dataset' is not numeric"):
        simple_effects(df, ["dataset"])
    assert list(simple_effects(df)) == ["leaf_mAP", "middle_mAP", "high_mAP", "hier_mAP"]


def test_missing_key_column_is_an_error():
    with pytest.raises(InputError, match="missing column 'seed'"):
        simple_effects(per_seed_table("S3").drop("seed"))


# ---------------------------------------------------------------------------------- redistribution


def test_redistribution_reproduces_paper_section_5_4():
    result = redistribution(per_seed_table("S3"))
    s = result.contrasts["geom_S"]
    # Paper §5.4: H_S - E_S changes CUB Class/Genus/Family mAP by -0.0594/-0.0074/+0.0134.
    assert [round(s[level].mean, 4) for level in ("leaf", "middle", "high")] == [-0.0594, -0.0074, 0.0134]
    assert result.pattern == {"geom_S": True, "geom_R": False}
    assert result.seeds_with_pattern == {"geom_S": 3, "geom_R": 0}
    cub = {(r["arm"], r["seed"]): r for r in per_seed_table("S3").iter_rows(named=True)}
    for level in ("leaf", "middle", "high"):
        col = f"{level}_mAP"
        for seed in SEEDS:
            hs, es, hr, er = (cub[(arm, seed)][col] for arm in ("H_S", "E_S", "H_R", "E_R"))
            assert result.contrasts["geom_S"][level].per_unit[seed] == hs - es
            assert result.contrasts["geom_R"][level].per_unit[seed] == hr - er


def test_redistribution_counts_seeds_showing_the_pattern():
    # Means follow the pattern, but seed 2 has middle going up.
    rows = []
    deltas = {1: (-0.02, -0.01, 0.01), 2: (-0.02, 0.005, 0.01), 3: (-0.02, -0.02, 0.01)}
    for seed, (dl, dm, dh) in deltas.items():
        rows += [
            ("ES", seed, 0.5, 0.4, 0.3),
            ("HS", seed, 0.5 + dl, 0.4 + dm, 0.3 + dh),
            ("ER", seed, 0.5, 0.4, 0.3),
            ("HR", seed, 0.51, 0.41, 0.29),
        ]
    df = pl.DataFrame(rows, schema=["arm", "seed", "leaf_R@1", "middle_R@1", "high_R@1"], orient="row")
    result = redistribution(df, "R@1")
    assert result.pattern["geom_S"] is True
    assert result.seeds_with_pattern["geom_S"] == 2
    assert result.pattern["geom_R"] is False
    assert result.contrasts["geom_S"]["middle"].positive == 1


def test_redistribution_needs_all_level_columns():
    with pytest.raises(InputError, match="needs column 'high_R@5'"):
        redistribution(per_seed_table("S3"), "R@5")


# ------------------------------------------------------------------------------- long -> per-seed


def make_long(seed: int = 0, seeds=(42, 2024), perts=(1, 2, 3)) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for a, s, p, level, metric in itertools.product(
        ARMS, seeds, perts, ("leaf", "middle", "high"), ("mAP", "R@1")
    ):
        rows.append(
            {
                "study_id": "st",
                "seed": s,
                "arm": a.replace("_", ""),
                "perturbation": p,
                "aggregation": "micro",
                "level": level,
                "metric": metric,
                "value": float(rng.uniform()),
            }
        )
    return pl.DataFrame(rows)


def test_per_seed_from_long_averages_perturbations_and_adds_hier():
    long = make_long()
    wide = per_seed_from_long(long)
    assert wide.columns == [
        "arm",
        "seed",
        "leaf_mAP",
        "middle_mAP",
        "high_mAP",
        "hier_mAP",
        "leaf_R@1",
        "middle_R@1",
        "high_R@1",
    ]
    assert wide["arm"].to_list() == [a for a in ARMS for _ in range(2)]
    sums: dict[tuple[str, int, str], list[float]] = {}
    for r in long.iter_rows(named=True):
        sums.setdefault((normalize_arm(r["arm"]), r["seed"], f"{r['level']}_{r['metric']}"), []).append(
            r["value"]
        )
    for r in wide.iter_rows(named=True):
        for col in ("leaf_mAP", "middle_mAP", "high_mAP", "leaf_R@1", "middle_R@1", "high_R@1"):
            values = sums[(r["arm"], r["seed"], col)]
            assert len(values) == 3
            assert r[col] == pytest.approx(sum(values) / 3, abs=1e-15)
        assert r["hier_mAP"] == pytest.approx((r["middle_mAP"] + r["high_mAP"]) / 2, abs=1e-15)


def test_hier_map_never_includes_the_leaf():
    long = make_long()
    bumped = long.with_columns(
        pl.when(pl.col("level") == "leaf")
        .then(pl.col("value") + 0.3)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    a, b = per_seed_from_long(long), per_seed_from_long(bumped)
    assert a["hier_mAP"].to_list() == b["hier_mAP"].to_list()
    assert a["leaf_mAP"].to_list() != b["leaf_mAP"].to_list()


def test_per_seed_from_long_feeds_effects():
    wide = per_seed_from_long(make_long(seed=3))
    effects = simple_effects(wide)
    assert "hier_mAP" in effects and effects["hier_mAP"]["geom_R"].n == 2


def test_long_missing_cell_is_an_error():
    long = make_long()
    drop = (
        (pl.col("arm") == "HS")
        & (pl.col("seed") == 2024)
        & (pl.col("perturbation") == 2)
        & (pl.col("level") == "middle")
        & (pl.col("metric") == "mAP")
    )
    with pytest.raises(InputError, match="arm H_S, seed 2024, perturbation 2: missing middle_mAP"):
        per_seed_from_long(long.filter(~drop))


def test_long_arm_missing_a_perturbation_is_an_error():
    long = make_long().filter(
        ~((pl.col("arm") == "ER") & (pl.col("seed") == 42) & (pl.col("perturbation") == 3))
    )
    with pytest.raises(InputError, match="seed 42: arms have different perturbations"):
        per_seed_from_long(long)


def test_long_duplicates_mixed_aggregation_and_bad_rows_are_errors():
    long = make_long()
    with pytest.raises(InputError, match="duplicate leaf_mAP for arm E_R, seed 42, perturbation 1"):
        per_seed_from_long(pl.concat([long, long.head(1)]))
    macro = long.head(1).with_columns(
        pl.lit("macro").alias("aggregation"), pl.lit(9, dtype=pl.Int64).alias("perturbation")
    )
    with pytest.raises(InputError, match="'aggregation' mixes several values"):
        per_seed_from_long(pl.concat([long, macro]))
    bad = long.with_columns(
        pl.when(pl.col("level") == "high").then(pl.lit("top")).otherwise(pl.col("level")).alias("level")
    )
    with pytest.raises(InputError, match="unknown level 'top'"):
        per_seed_from_long(bad)
    nan = long.with_columns(
        pl.when(pl.col("seed") == 42).then(float("nan")).otherwise(pl.col("value")).alias("value")
    )
    with pytest.raises(InputError, match="is nan"):
        per_seed_from_long(nan)
    with pytest.raises(InputError, match="missing column 'perturbation'"):
        per_seed_from_long(long.drop("perturbation"))


# ------------------------------------------------------------------------------------------- CSV


CSV_GOOD = """arm,seed,dataset,hier_mAP,leaf_R@1
E_R,1,cub,0.50,0.70
hr,1,cub,0.52,0.72
ES,1,cub,0.58,0.60
H-S,1,cub,0.585,0.55
ER,2,cub,0.51,0.71
HR,2,cub,0.53,0.70
ES,2,cub,0.57,0.61
HS,2,cub,0.575,0.56
"""


def test_load_effects_csv_reads_spellings_and_skips_text_columns(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text(CSV_GOOD)
    df = load_effects_csv(path)
    assert df.columns == ["arm", "seed", "hier_mAP", "leaf_R@1"]
    assert df["arm"].to_list() == ["E_R", "H_R", "E_S", "H_S"] * 2
    assert df.schema["seed"] == pl.Int64
    e = simple_effects(df)["hier_mAP"]["geom_S"]
    assert e.per_unit == {1: pytest.approx(0.005), 2: pytest.approx(0.005)}
    assert load_effects_csv(path, ["leaf_R@1"]).columns == ["arm", "seed", "leaf_R@1"]


def _csv_error(tmp_path, text: str, metrics=None) -> str:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_effects_csv(path, metrics)
    assert str(path) in str(err.value)
    return str(err.value)


def test_csv_missing_columns(tmp_path):
    text = _csv_error(tmp_path, "arm,m\nER,0.1\n")
    assert "missing column 'seed'" in text
    text = _csv_error(tmp_path, "Seed,m\n1,0.1\n")
    assert "missing column 'arm'" in text


def test_csv_unknown_arm_and_non_numeric_cells_name_row_and_column(tmp_path):
    text = _csv_error(tmp_path, "arm,seed,m,n\nER,1,0.1,0.2\nXR,1,0.2,0.3\nES,1,abc,0.4\nHS,x,0.3,\n")
    assert "row 3, column 'arm': unknown arm 'XR'" in text
    assert "row 4, column 'm': 'abc' is not a finite number" in text
    assert "row 5, column 'seed': seed 'x' is not an integer" in text
    assert "row 5, column 'n': empty cell is not a finite number" in text


def test_csv_nan_cell_and_duplicates(tmp_path):
    assert "row 2, column 'm': 'nan' is not a finite number" in _csv_error(
        tmp_path, "arm,seed,m\nER,1,nan\nHR,1,0.2\n"
    )
    text = _csv_error(tmp_path, "arm,seed,m\nER,1,0.1\nE_R,1,0.2\n")
    assert "row 3: arm E_R, seed 1 repeats row 2" in text


def test_csv_metric_selection_lists_valid_columns(tmp_path):
    text = _csv_error(tmp_path, CSV_GOOD, ["genus_mAP"])
    assert "--metric 'genus_mAP': no such column" in text
    assert "valid metric columns: hier_mAP, leaf_R@1" in text
    assert "column holds no numbers" in _csv_error(tmp_path, CSV_GOOD, "dataset")


def test_csv_missing_file_and_ragged_rows(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_effects_csv(tmp_path / "nope.csv")
    assert "row 3: 2 fields, the header has 3" in _csv_error(tmp_path, "arm,seed,m\nER,1,0.1\nHR,1\n")
