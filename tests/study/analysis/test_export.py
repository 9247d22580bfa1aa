"""Writing tables: formats read back through polars and DuckDB, mean ± SD rendering, overwrite rules."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hierconsole.errors import HierconsoleError, InputError
from hierconsole.present.export import (
    FORMATS,
    check_format,
    export_table,
    latex_escape,
    render_latex,
    render_markdown,
    write_table,
)
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.analysis.frames import (
    TABLES,
    analysis_frame,
    arms_frame,
    effects_frame,
    recall_frame,
    redistribution_frame,
)
from hierconsole.study.analysis.redistribution import redistribution
from hierconsole.study.analysis.statistics import EVIDENCE_KEYS
from hierconsole.vocabulary import ARMS
from tests.paper_tables import per_seed_table


@pytest.fixture
def per_seed() -> pl.DataFrame:
    return per_seed_table("S3")


def sample_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "arm": ["E_R", "H_S", "E_S"],
            "metric": ["hier_mAP", "leaf_R@1", "50% & #1"],
            "mean": [0.0487, 1 / 3, 0.25],
            "sd": [0.0012, None, 0.1],
            "n": [3, 1, 3],
        }
    )


# ----------------------------------------------------------------------------------------- formats


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_data_formats_read_back_equal_through_polars_and_duckdb(tmp_path, fmt):
    df = sample_frame()
    path = write_table(df, tmp_path / f"t.{fmt}", fmt)
    assert path == tmp_path / f"t.{fmt}"
    reader = {"csv": "read_csv", "parquet": "read_parquet", "json": "read_json"}[fmt]
    via_duckdb = duckdb.sql(f"SELECT * FROM {reader}('{path}')").pl()
    via_polars = {"csv": pl.read_csv, "parquet": pl.read_parquet, "json": pl.read_json}[fmt](path)
    for back in (via_duckdb, via_polars):
        assert back.columns == df.columns
        assert back["mean"].to_list() == df["mean"].to_list()  # full precision, not rounded
        assert back["sd"].to_list() == df["sd"].to_list()
        assert back["metric"].to_list() == df["metric"].to_list()
        assert back["n"].to_list() == df["n"].to_list()


def test_markdown_renders_mean_pm_sd(tmp_path):
    path = write_table(sample_frame(), tmp_path / "t.md", "md", precision=4)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "| arm | metric | mean ± SD | n |"
    assert lines[1] == "|:---|:---|---:|---:|"
    assert "| E_R | hier_mAP | 0.0487 ± 0.0012 | 3 |" in lines
    assert "| H_S | leaf_R@1 | 0.3333 ± n/a | 1 |" in lines
    assert "0.04870" not in text
    assert "0.04870 ± 0.00120" in render_markdown(sample_frame(), precision=5)


def test_latex_renders_pm_and_escapes_specials(tmp_path):
    path = write_table(sample_frame(), tmp_path / "t.tex", "latex", precision=3)
    text = path.read_text(encoding="utf-8")
    assert "\\begin{tabular}{llrr}" in text
    assert "arm & metric & mean $\\pm$ SD & n \\\\" in text
    assert "E\\_R & hier\\_mAP & 0.049 $\\pm$ 0.001 & 3 \\\\" in text
    assert "50\\% \\& \\#1" in text
    assert "\\toprule" in text and "\\bottomrule" in text


def test_latex_escape_every_special():
    assert latex_escape("a_b%c&d#e$f{g}h~i^j\\k") == (
        "a\\_b\\%c\\&d\\#e\\$f\\{g\\}h\\textasciitilde{}i\\textasciicircum{}j\\textbackslash{}k"
    )
    assert latex_escape("H_S − E_S ±") == "H\\_S $-$ E\\_S $\\pm$"


def test_suffixed_pairs_merge_in_text_formats():
    df = pl.DataFrame({"arm": ["E_R"], "n": [3], "R@1_mean": [0.7718], "R@1_sd": [0.0025]})
    md = render_markdown(df)
    assert md.splitlines()[0] == "| arm | n | R@1 |"
    assert "0.7718 ± 0.0025" in md
    assert "0.7718 $\\pm$ 0.0025" in render_latex(df)


def test_refuses_overwrite_without_force_and_replaces_with_force(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("keep me")
    with pytest.raises(HierconsoleError, match="(?s)already exists.*--force"):
        write_table(sample_frame(), path, "csv")
    assert path.read_text() == "keep me"
    write_table(sample_frame(), path, "csv", force=True)
    assert pl.read_csv(path)["mean"].to_list() == sample_frame()["mean"].to_list()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]  # no temp file left


def test_failed_write_leaves_no_temp_file(tmp_path):
    nested = pl.DataFrame({"x": [[1, 2]]})  # CSV cannot hold a list column
    with pytest.raises(Exception):  # noqa: B017 - polars' own error type is not ours to pin
        write_table(nested, tmp_path / "t.csv", "csv")
    assert list(tmp_path.iterdir()) == []


def test_format_errors_and_inference(tmp_path):
    with pytest.raises(HierconsoleError) as err:
        write_table(sample_frame(), tmp_path / "t.xlsx", "xlsx")
    for fmt in FORMATS:
        assert fmt in str(err.value)
    assert check_format(None, "a/b.PARQUET") == "parquet"
    assert check_format(None, "x.tex") == "latex"
    assert check_format("MD") == "md"
    with pytest.raises(HierconsoleError, match="cannot tell the format"):
        check_format(None, "table.xlsx")
    with pytest.raises(HierconsoleError, match="does not exist"):
        write_table(sample_frame(), tmp_path / "missing" / "t.csv", "csv")
    with pytest.raises(HierconsoleError, match="out of range"):
        write_table(sample_frame(), tmp_path / "t.md", "md", precision=40)


# ---------------------------------------------------------------------------------- export_table


def test_tables_registry_names():
    assert list(TABLES) == [
        "runs",
        "metrics",
        "arms",
        "effects",
        "recall",
        "deviation",
        "redistribution",
        "headline",
        "variance",
        "audits",
        "tuning",
        "durations",
    ]
    assert all(isinstance(v, str) and v for v in TABLES.values())


def test_export_table_calls_provider_with_table_and_study(tmp_path):
    calls = []

    def provider(table: str, study: str | None) -> pl.DataFrame:
        calls.append((table, study))
        return sample_frame()

    path, frame = export_table("runs", provider, tmp_path / "runs.parquet", None, study_id="s1")
    assert calls == [("runs", "s1")]
    assert_frame_equal(pl.read_parquet(path), frame)


def test_export_table_checks_before_querying(tmp_path):
    calls = []

    def provider(table: str, study: str | None) -> pl.DataFrame:
        calls.append(table)
        return sample_frame()

    with pytest.raises(HierconsoleError) as err:
        export_table("nope", provider, tmp_path / "x.csv", "csv")
    for name in TABLES:
        assert name in str(err.value)
    with pytest.raises(HierconsoleError, match="unknown format"):
        export_table("runs", provider, tmp_path / "x.csv", "xml")
    (tmp_path / "x.csv").write_text("old")
    with pytest.raises(HierconsoleError, match="already exists"):
        export_table("runs", provider, tmp_path / "x.csv", "csv")
    assert calls == []


# ------------------------------------------------------------------------------- analysis frames


def test_effects_frame_holds_the_effects(per_seed):
    effects = simple_effects(per_seed)
    frame = effects_frame(effects)
    assert frame.columns == [
        "metric",
        "effect",
        "definition",
        "seed_42",
        "seed_2024",
        "seed_3407",
        "mean",
        "sd",
        "positive_seeds",
        "n_seeds",
        *EVIDENCE_KEYS,
    ]
    assert frame.height == 4 * 5
    row = frame.filter((pl.col("metric") == "hier_mAP") & (pl.col("effect") == "interaction")).row(
        0, named=True
    )
    e = effects["hier_mAP"]["interaction"]
    assert row["seed_42"] == e.per_unit[42] and row["mean"] == e.mean and row["sd"] == e.sd
    assert row["positive_seeds"] == 0 and row["n_seeds"] == 3
    assert row["definition"] == "(H_S - E_S) - (H_R - E_R)"
    md = render_markdown(frame.filter(pl.col("metric") == "hier_mAP"), precision=6)
    # Paper Table S7 (computed from its 6-decimal arm values, so the interaction's last digit differs).
    assert "-0.007246 ± 0.000804" in md
    assert "0.010246 ± 0.000416" in md  # geom_R
    assert "0.048670 ± 0.000409" in md  # loss_E
    # The intervals: one "[lo, hi]" cell each in Markdown and LaTeX, full precision in CSV and Parquet.
    geom = effects["hier_mAP"]["geom_R"].evidence
    assert md.splitlines()[0].count("ci95_t") == 1 and "ci95_t_hi" not in md
    assert f"[{geom.ci95_t[0]:.6f}, {geom.ci95_t[1]:.6f}]" in md
    assert f"[{geom.ci95_boot[0]:.6f}, {geom.ci95_boot[1]:.6f}]" in md
    tex = render_latex(frame.filter(pl.col("metric") == "hier_mAP"), precision=6)
    assert f"[{geom.ci95_t[0]:.6f}, {geom.ci95_t[1]:.6f}]" in tex and "ci95\\_boot" in tex
    row = frame.filter((pl.col("metric") == "hier_mAP") & (pl.col("effect") == "geom_R")).row(0, named=True)
    assert (row["ci95_t_lo"], row["ci95_t_hi"]) == geom.ci95_t
    assert row["p_signflip"] == 0.25 and row["ci95_boot_seed"] is None


def test_latex_guards_an_interval_that_starts_a_row():
    df = pl.DataFrame({"ci95_t_lo": [-0.5, 0.1], "ci95_t_hi": [0.5, None]})
    tex = render_latex(df, precision=2)
    # `\\ [` would read the interval as the row break's optional argument; an undefined one is left empty.
    assert "{}[-0.50, 0.50] \\\\" in tex
    assert tex.splitlines()[6] == " \\\\"


def test_arms_frame_is_paper_table1(per_seed, tmp_path):
    frame = arms_frame(arm_table(per_seed))
    assert frame.columns[:4] == ["arm", "n", "leaf_mAP_mean", "leaf_mAP_sd"]
    assert frame["arm"].to_list() == list(ARMS)
    md = write_table(frame, tmp_path / "arms.md", "md").read_text(encoding="utf-8")
    assert md.splitlines()[0] == "| arm | n | leaf_mAP | middle_mAP | high_mAP | hier_mAP |"
    # Paper Table 1, CUB E_R and H_S rows.
    assert "| E_R | 3 | 0.6171 ± 0.0028 | 0.4991 ± 0.0017 | 0.5636 ± 0.0010 | 0.5314 ± 0.0013 |" in md
    assert "| H_S | 3 | 0.4550 ± 0.0016 | 0.5405 ± 0.0022 | 0.6255 ± 0.0006 | 0.5830 ± 0.0009 |" in md


def test_recall_frame_groups_levels_and_k():
    per_seed = pl.DataFrame(
        {
            "arm": ["E_R", "E_R", "H_S", "H_S"],
            "seed": [1, 2, 1, 2],
            "leaf_R@1": [0.7, 0.8, 0.6, 0.62],
            "leaf_R@5": [0.9, 0.95, 0.85, 0.86],
            "high_R@1": [0.1, 0.2, 0.3, 0.5],
            "hier_mAP": [0.5, 0.5, 0.6, 0.6],
        }
    )
    frame = recall_frame(arm_table(per_seed))
    assert frame.columns == ["arm", "level", "n", "R@1_mean", "R@1_sd", "R@5_mean", "R@5_sd"]
    rows = {(r["arm"], r["level"]): r for r in frame.iter_rows(named=True)}
    assert set(rows) == {("E_R", "leaf"), ("E_R", "high"), ("H_S", "leaf"), ("H_S", "high")}
    assert rows[("H_S", "high")]["R@1_mean"] == pytest.approx(0.4)
    assert rows[("H_S", "high")]["R@1_sd"] == pytest.approx(0.1414213562373095)
    assert rows[("E_R", "high")]["R@5_mean"] is None
    with pytest.raises(InputError, match="no Recall@K"):
        recall_frame(arm_table(per_seed, ["hier_mAP"]))


def test_redistribution_frame(per_seed):
    frame = redistribution_frame(redistribution(per_seed))
    assert frame.height == 6
    assert frame["contrast"].to_list() == ["geom_S"] * 3 + ["geom_R"] * 3
    assert frame["level"].to_list() == ["leaf", "middle", "high"] * 2
    assert frame["pattern"].to_list() == [True] * 3 + [False] * 3
    assert [round(v, 4) for v in frame["mean"].to_list()[:3]] == [-0.0594, -0.0074, 0.0134]


def test_analysis_frame_dispatch(per_seed):
    assert analysis_frame("effects", per_seed, metrics=["hier_mAP"]).height == 5
    assert analysis_frame("arms", per_seed).height == 4
    assert analysis_frame("redistribution", per_seed).height == 6
    with pytest.raises(HierconsoleError, match="comes from the study store"):
        analysis_frame("runs", per_seed)
    with pytest.raises(HierconsoleError, match="unknown table"):
        analysis_frame("bogus", per_seed)
