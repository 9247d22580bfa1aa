"""`hierconsole effects` and `hierconsole export`, driven in-process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from hierconsole.cli import main
from hierconsole.present.export import FORMATS
from hierconsole.study.analysis.effects import effects_json, simple_effects
from hierconsole.study.analysis.frames import TABLES
from hierconsole.study.read.per_seed_csv import load_effects_csv
from tests.paper_tables import per_seed_csv

# Paper Table S7 (CUB), written with the short arm spellings a user might bring.
CUB_CSV = per_seed_csv("S3")


@pytest.fixture
def cub_csv(tmp_path) -> Path:
    path = tmp_path / "cub.csv"
    path.write_text(CUB_CSV)
    return path


def run(tmp_path, capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["--home", str(tmp_path / "home"), *argv])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())  # rich may wrap long error lines


# ----------------------------------------------------------------------------------------- effects


def test_effects_json_from_csv_is_exactly_the_effects_json(tmp_path, capsys, cub_csv):
    code, out, _ = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--json")
    assert code == 0
    whole = json.loads(out)
    doc = whole["effects"]
    assert doc == effects_json(simple_effects(load_effects_csv(cub_csv)))
    assert list(doc) == ["leaf_mAP", "middle_mAP", "high_mAP", "hier_mAP"]
    # The arm table is in the JSON too, the same rows as the text form's (paper Table 1, CUB E_R hier).
    e_r = next(r for r in whole["arms"] if r["arm"] == "E_R" and r["metric"] == "hier_mAP")
    assert (round(e_r["mean"], 4), round(e_r["sd"], 4), e_r["n"]) == (0.5314, 0.0013, 3)
    assert whole["baseline_contrasts"] == {} and whole["omitted"] is None
    geom_r = doc["hier_mAP"]["geom_R"]
    assert geom_r["per_seed"]["42"] == pytest.approx(0.542911 - 0.532472, abs=1e-15)
    assert round(geom_r["mean"], 6) == 0.010246 and round(geom_r["sd"], 6) == 0.000416  # paper Table S7
    assert geom_r["positive_seeds"] == 3 and geom_r["n_seeds"] == 3
    assert doc["hier_mAP"]["interaction"]["positive_seeds"] == 0


def test_effects_with_a_sesoi_give_each_effect_its_tost_verdict_and_adjusted_p(tmp_path, capsys, cub_csv):
    code, out, _ = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--sesoi", "0.005", "--json")
    assert code == 0
    geom_r = json.loads(out)["effects"]["hier_mAP"]["geom_R"]
    # Paper Table S7's geom_R on CUB: +0.0102 with an SD of 0.0004 over 3 seeds, far beyond ±0.005.
    assert geom_r["sesoi"] == 0.005 and geom_r["verdict"] == "different" and geom_r["p_tost"] > 0.05
    assert geom_r["family"] == "mAP effects" and geom_r["p_holm"] >= geom_r["p_signflip"]
    code, out, _ = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--sesoi", "0.005", "--metric", "hier_mAP")
    assert code == 0
    flat = " ".join(out.split())
    assert "p (Holm)" in flat and "verdict" in flat and "different" in flat
    assert "adjusted over its family (mAP effects)" in flat and "p (TOST): paired TOST against ±SESOI" in flat


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "nan"])
def test_a_bad_sesoi_is_refused_in_one_line_before_anything_is_read(tmp_path, capsys, cub_csv, bad):
    code, out, err = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), f"--sesoi={bad}")
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"--sesoi {bad}: the smallest effect size of interest is a positive number" in err


def test_effects_metric_selection(tmp_path, capsys, cub_csv):
    code, out, _ = run(
        tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--metric", "high_mAP", "--json"
    )
    assert code == 0
    assert list(json.loads(out)["effects"]) == ["high_mAP"]
    code, out, err = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--metric", "genus_mAP")
    assert code == 2 and out == ""
    assert "genus_mAP" in err and "valid metric columns: leaf_mAP, middle_mAP, high_mAP, hier_mAP" in err
    assert "Traceback" not in err


def test_effects_tables_show_mean_sd_and_seed_counts(tmp_path, capsys, cub_csv):
    # --wide: every column, the effects at their full precision.
    code, out, _ = run(tmp_path, capsys, "--wide", "effects", "--from-csv", str(cub_csv))
    assert code == 0
    assert "Arms: mean ± sample SD over 3 seeds" in out and "(H_S - E_S) - (H_R - E_R)" in out
    assert "0.5314 ± 0.0013" in out  # paper Table 1, CUB E_R mean hierarchy
    assert "+0.010246 ± 0.000416" in out  # paper Table S7, geom_R
    assert "+0.048670 ± 0.000409" in out  # loss_E
    assert " 3/3 " in out and " 0/3 " in out
    assert re.search(r"geom_S \(H_S - E_S\).* yes .* 3/3", out)  # H_S - E_S redistribution pattern
    # By default the tables fit 80 columns whole: narrower forms, every number at full precision, legends.
    code, out, _ = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv))
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    assert "0.5314 ± 0.0013" in out and "+0.010246 ± 0.000416" in out and "(per seed; 95% intervals; tests" in out
    assert "arms: E = Euclidean, H = Poincaré" in out and "interaction = (H_S - E_S) - (H_R - E_R)" in out
    code, out, _ = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--precision", "2")
    assert code == 0 and "0.53 ± 0.00" in out and "+0.01 ± 0.00" in out
    code, _, err = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--precision", "-1")
    assert code == 2 and "out of range" in err


def test_effects_missing_cell_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "partial.csv"
    path.write_text("\n".join(line for line in CUB_CSV.splitlines() if not line.startswith("HS,2024")) + "\n")
    code, out, err = run(tmp_path, capsys, "effects", "--from-csv", str(path), "--json")
    assert code == 2 and out == ""
    assert "seed 2024 lacks arm(s) H_S" in err
    assert "nan" not in err.lower()


def test_effects_on_an_empty_store_says_how_to_get_a_study(tmp_path, capsys, cub_csv):
    code, _, err = run(tmp_path, capsys, "effects")
    assert code == 2 and "no hierconsole home at" in err  # a home that does not exist is named as such
    (tmp_path / "home").mkdir()
    code, _, err = run(tmp_path, capsys, "effects")
    assert code == 2 and "no study yet" in err and "hierconsole run" in err
    code, _, err = run(tmp_path, capsys, "effects", "s1", "--from-csv", str(cub_csv))
    assert code == 2 and "not both" in err


def test_export_effects_from_csv_reads_back_equal_to_the_cli_json(tmp_path, capsys, cub_csv):
    _, out, _ = run(tmp_path, capsys, "effects", "--from-csv", str(cub_csv), "--json")
    doc = json.loads(out)["effects"]
    for fmt, reader in (("parquet", "read_parquet"), ("csv", "read_csv"), ("json", "read_json")):
        target = tmp_path / f"effects.{fmt}"
        code, out, _ = run(
            tmp_path,
            capsys,
            "export",
            "effects",
            "--from-csv",
            str(cub_csv),
            "--format",
            fmt,
            "-o",
            str(target),
        )
        assert code == 0
        assert str(target) in out
        rows = duckdb.sql(f"SELECT * FROM {reader}('{target}') ORDER BY metric, effect").fetchall()
        columns = [d[0] for d in duckdb.sql(f"SELECT * FROM {reader}('{target}')").description]
        assert len(rows) == 20
        for row in rows:
            r = dict(zip(columns, row, strict=True))
            entry = doc[r["metric"]][r["effect"]]
            assert r["mean"] == entry["mean"] and r["sd"] == entry["sd"]
            assert r["positive_seeds"] == entry["positive_seeds"] and r["n_seeds"] == entry["n_seeds"]
            for seed, value in entry["per_seed"].items():
                assert r[f"seed_{seed}"] == value


def test_export_markdown_and_latex_show_mean_sd(tmp_path, capsys, cub_csv):
    md = tmp_path / "arms.md"
    code, _, _ = run(tmp_path, capsys, "export", "arms", "--from-csv", str(cub_csv), "-o", str(md))
    assert code == 0
    assert (
        "| E_R | 3 | 0.6171 ± 0.0028 | 0.4991 ± 0.0017 | 0.5636 ± 0.0010 | 0.5314 ± 0.0013 |"
        in md.read_text(encoding="utf-8")
    )
    tex = tmp_path / "effects.tex"
    code, _, _ = run(
        tmp_path,
        capsys,
        "export",
        "effects",
        "--from-csv",
        str(cub_csv),
        "--metric",
        "hier_mAP",
        "--format",
        "latex",
        "-o",
        str(tex),
        "--precision",
        "6",
    )
    assert code == 0
    text = tex.read_text(encoding="utf-8")
    assert "hier\\_mAP & geom\\_R" in text
    assert "0.010246 $\\pm$ 0.000416" in text


def test_export_refuses_overwrite_without_force(tmp_path, capsys, cub_csv):
    target = tmp_path / "e.csv"
    target.write_text("precious")
    args = ["export", "effects", "--from-csv", str(cub_csv), "-o", str(target)]
    code, _, err = run(tmp_path, capsys, *args)
    assert code == 2 and "already exists" in err and "--force" in err
    assert target.read_text() == "precious"
    code, _, _ = run(tmp_path, capsys, *args, "--force")
    assert code == 0
    assert pl.read_csv(target).height == 20


def test_export_unknown_table_and_format_list_valid_ones(tmp_path, capsys, cub_csv):
    code, _, err = run(tmp_path, capsys, "export", "bogus", "-o", str(tmp_path / "x.csv"))
    assert code == 2
    assert all(name in err for name in TABLES)
    code, _, err = run(
        tmp_path,
        capsys,
        "export",
        "effects",
        "--from-csv",
        str(cub_csv),
        "--format",
        "xlsx",
        "-o",
        str(tmp_path / "x"),
    )
    assert code == 2
    assert all(fmt in err for fmt in FORMATS)
    assert not (tmp_path / "x").exists()


def test_export_store_table_from_csv_is_refused(tmp_path, capsys, cub_csv):
    code, _, err = run(
        tmp_path, capsys, "export", "runs", "--from-csv", str(cub_csv), "-o", str(tmp_path / "r.csv")
    )
    assert code == 2 and "cannot be computed from a CSV" in err
