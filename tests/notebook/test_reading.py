"""The notebook API reads what the CLI prints: every number of `effects --json`, `export ... --format json`
and the listings equal to the API's frames, on the fixed store; bad homes are one clear error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hierconsole as hc
from hierconsole.errors import HierconsoleError
from tests.notebook.cli_reference import (
    assert_long_equals,
    assert_summary_equals,
    cli,
    cli_json,
    effect_entries,
    table_cells,
)
from tests.stores.fixed import COMPLETE, LIVE

pytestmark = pytest.mark.slow  # each read is compared with the CLI's, run in a subprocess


@pytest.fixture(scope="module")
def home(fixed_home):
    return hc.open_home(fixed_home)


def test_effects_are_the_numbers_of_effects_json(home, fixed_home):
    doc = cli_json(fixed_home, "effects", COMPLETE, "--json")
    expected = effect_entries(doc)
    long = home.effects(COMPLETE)
    assert_long_equals(long, expected, ("group", "metric", "effect"))
    assert set(long["seed"]) == {42, 2024, 3407}
    assert_summary_equals(home.effects(COMPLETE, summary=True), expected, ("group", "metric", "effect"))
    # The arm table is the JSON's, row for row.
    assert home.arms(COMPLETE).to_dicts() == doc["arms"]


def test_effects_narrowed_to_metrics_match_the_cli_narrowed(home, fixed_home):
    doc = cli_json(fixed_home, "effects", COMPLETE, "--json", "--metric", "hier_mAP", "--metric", "leaf_R@1")
    long = home.effects(COMPLETE, ["hier_mAP", "leaf_R@1"])
    assert set(long["metric"]) == {"hier_mAP", "leaf_R@1"}
    assert_long_equals(long, effect_entries(doc), ("group", "metric", "effect"))


def test_the_newest_study_is_the_default_as_in_the_cli(home):
    assert home.study_id() == LIVE
    assert home.study_id("demo-comp") == COMPLETE


@pytest.mark.parametrize("table", ["metrics", "runs", "audits", "effects", "arms", "variance"])
def test_tables_are_the_rows_export_writes(home, fixed_home, table):
    rows = cli_json(fixed_home, "export", table, "--study", COMPLETE, "-o", "-", "--format", "json")
    frame = home.metrics(COMPLETE) if table == "metrics" else home.table(table, COMPLETE)
    # Through the same JSON writer, so dates and floats are written alike.
    assert json.loads(frame.write_json()) == rows


def test_studies_runs_and_audits_are_what_the_listings_show(home, fixed_home):
    studies = home.studies()
    assert studies["study_id"].to_list() == [COMPLETE, LIVE]
    out = cli(fixed_home, "--wide", "studies").stdout
    for s in studies.iter_rows(named=True):
        (line,) = [line for line in out.splitlines() if s["study_id"] in line]
        assert f"{s['jobs_finished']}/{s['jobs']}" in line and s["phase"] in line

    runs = home.runs()
    out = cli(fixed_home, "--wide", "runs").stdout
    assert runs.height == 7
    for j in runs.iter_rows(named=True):
        (line,) = [line for line in out.splitlines() if f" {j['job_id']} " in f" {line} "]
        assert f" {j['done']}/{j['total']} " in line and f" {j['shown_state']} " in line
    # Nobody drives the fixed store: its running job reads as orphaned, in both.
    assert "orphaned" in home.runs(LIVE)["shown_state"].to_list()
    assert set(home.runs(COMPLETE)["study_id"]) == {COMPLETE}

    audits = home.audits(COMPLETE)
    done = cli(fixed_home, "--wide", "audit", COMPLETE)
    assert done.returncode == 1  # one check fails, in both
    assert audits.filter(ok=False)["check"].to_list() == ["update_budget"]
    assert audits["recorded"].all()
    for c in audits.iter_rows(named=True):
        (cells,) = [cells for cells in map(table_cells, done.stdout.splitlines()) if cells[:1] == [c["check"]]]
        assert cells[1] == ("FAIL" if c["ok"] is False else "pass")


def test_every_read_leaves_the_home_unchanged(fixed_copy):
    before = {p: p.stat().st_mtime_ns for p in fixed_copy.rglob("*")}
    home = hc.open_home(fixed_copy)
    home.studies(), home.runs(), home.effects(COMPLETE), home.audits(LIVE), home.metrics(COMPLETE)
    assert {p: p.stat().st_mtime_ns for p in fixed_copy.rglob("*")} == before


def test_a_missing_folder_or_a_folder_without_a_store_is_one_clear_error(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(HierconsoleError, match="does not exist") as err:
        hc.open_home(missing)
    assert str(missing) in str(err.value) and not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(HierconsoleError, match="not a hierconsole home") as err:
        hc.open_home(empty)
    assert str(empty) in str(err.value) and list(empty.iterdir()) == []
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    with pytest.raises(HierconsoleError, match="is a file"):
        hc.open_home(afile)
    with pytest.raises(HierconsoleError, match="writable=True"):
        hc.open_home(empty, create=True)


def test_a_file_that_is_no_store_says_so(tmp_path):
    (tmp_path / "hierconsole.duckdb").write_bytes(b"not a database" * 1000)
    with pytest.raises(HierconsoleError, match="cannot be opened"):
        hc.open_home(tmp_path)


def test_a_read_only_home_refuses_to_run(home, fixed_home):
    with pytest.raises(HierconsoleError, match="writable=True") as err:
        home.run("demo")
    assert str(fixed_home) in str(err.value)


def test_unknown_study_and_family_are_the_read_layers_errors(home):
    with pytest.raises(HierconsoleError, match="no study 'nope'"):
        home.effects("nope")
    with pytest.raises(HierconsoleError, match="not a family"):
        home.contrast("nope")
    with pytest.raises(HierconsoleError, match="no family"):
        home.family("nope")
    with pytest.raises(HierconsoleError, match="not a contrast metric"):
        home.contrast(COMPLETE, LIVE, metric="bogus")
    # A study still training has no test metrics: the CLI's sentence.
    with pytest.raises(HierconsoleError, match="no official-test metrics yet"):
        home.effects(LIVE)
    assert home.families().is_empty()


def test_the_package_and_open_home_import_no_torch():
    code = (
        "import sys, hierconsole\n"
        "assert not {'torch', 'duckdb', 'polars'} & set(sys.modules), sorted(sys.modules)\n"
        "hierconsole.open_home\n"
        "heavy = {'torch', 'geoopt', 'ray', 'matplotlib', 'textual'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_comparison_catches_one_changed_value_and_one_missing_row(home, fixed_home):
    import polars as pl

    expected = effect_entries(cli_json(fixed_home, "effects", COMPLETE, "--json"))
    long = home.effects(COMPLETE)
    nudged = long.with_columns(
        pl.when(pl.int_range(pl.len()) == 7).then(pl.col("value") + 1e-12).otherwise(pl.col("value")).alias("value")
    )
    with pytest.raises(AssertionError):
        assert_long_equals(nudged, expected, ("group", "metric", "effect"))
    with pytest.raises(AssertionError):
        assert_long_equals(long.slice(1), expected, ("group", "metric", "effect"))
    with pytest.raises(AssertionError):
        assert_long_equals(long.with_columns(pl.lit(0.0).alias("sd")), expected, ("group", "metric", "effect"))


def test_pandas_users_get_the_same_rows(home, fixed_home):
    pytest.importorskip("pandas")  # the `notebook` extra
    long = home.effects(COMPLETE)
    frame = long.to_pandas()
    assert list(frame.columns) == long.columns and len(frame) == long.height
    expected = effect_entries(cli_json(fixed_home, "effects", COMPLETE, "--json"))
    for row in frame.itertuples(index=False):
        assert row.value == expected[(row.group, row.metric, row.effect)]["per_seed"][str(row.seed)]


def test_create_starts_an_empty_writable_home_and_reading_it_creates_no_store(tmp_path):
    path = tmp_path / "new" / "home"
    home = hc.open_home(path, writable=True, create=True)
    assert home.writable and path.is_dir()
    assert home.studies().is_empty() and home.runs().is_empty() and home.families().is_empty()
    assert list(path.iterdir()) == []  # a store is made by the first run, not by reading
    assert "not created yet" in (home.source or "")
