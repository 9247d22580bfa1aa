"""The replication's plan and tables on plain values and a fixed store: every study run's overrides are
valid for its shipped preset or family at both scales, `--set` reads back what the stage meant, and the
measured tables equal a hand computation from the studies' per-seed metrics."""

from __future__ import annotations

import statistics

import polars as pl
import pytest

from hierconsole.config.family import load_family
from hierconsole.config.files import load_preset
from hierconsole.config.overrides import parse_assignment
from hierconsole.present.report.replication_tables import write_tables
from hierconsole.study.analysis.paper_tables import paper_long
from hierconsole.study.db.storage import Store
from hierconsole.study.read.paper_tables import TABLES, replication_tables
from hierconsole.study.read.results import per_seed
from hierconsole.study.replication.graph import ordered
from hierconsole.study.replication.stages import (
    PAPER,
    SCALES,
    SMOKE,
    STAGE_RUNS,
    assignment,
    paper_stages,
    run_overrides,
)
from tests.stores.fixed import COMPLETE, add_family, complete_study

RUNS = [(stage, run) for stage, runs in STAGE_RUNS.items() for run in runs]


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize(("stage", "run"), RUNS, ids=[f"{s}:{r.name}" for s, r in RUNS])
def test_every_study_run_is_a_valid_preset_at_each_scale(stage, run, scale):
    values = run_overrides(run, scale)
    parsed = dict(parse_assignment(assignment(k, v)) for k, v in values.items())
    assert parsed == {k: ("none" if v is None else v) for k, v in values.items()}
    if run.family:
        family = load_family(run.preset).with_overrides(parsed)
        presets = [m.preset for m in family.members]
    else:
        presets = [load_preset(run.preset).with_overrides(values=parsed)]
    for preset in presets:
        if scale == SMOKE:
            assert preset.training.epochs == 2 and len(preset.training.seeds) == 2
            assert preset.expected.development_images is None
        elif not run.family:  # the paper's protocol: the preset's own budgets
            assert preset.training.epochs == load_preset(run.preset).training.epochs


def test_the_paper_scale_keeps_the_presets_budgets():
    for _, run in RUNS:
        values = run_overrides(run, PAPER)
        assert not {"training.epochs", "training.seeds", "evaluation.n_query"} & set(values), run


def test_a_replication_on_one_dataset_has_its_stages_only():
    cub = [s.name for s in ordered(paper_stages(frozenset({"cub"})))]
    assert cub[:3] == ["extract-cub", "taxonomy-cub", "import-cub"] and cub[-2:] == ["tables", "report"]
    assert not any("nabirds" in s for s in cub)
    both = {s.name for s in paper_stages(frozenset({"cub", "nabirds"}))}
    assert set(STAGE_RUNS) <= both


SPLITS = {"split-1": 0.0, "split-2": 0.01, "split-3": -0.02}


@pytest.fixture
def outer_family(fixed_copy, monkeypatch):
    with Store(fixed_copy) as store:
        members = {
            name: (complete_study(store, f"outer-{name}", monkeypatch, {"study.name": f"outer.{name}"}, shift), {})
            for name, shift in SPLITS.items()
        }
        add_family(store, "outer", members, [])
    return fixed_copy


def test_outer_split_arms_are_means_over_splits_with_the_sd_over_splits(outer_family):
    outputs = {"factorial-cub": {"factorial": COMPLETE}, "families-cub": {"genus-disjoint": "outer-1"}}
    with Store(outer_family, read_only=True) as store:
        tables, omitted = replication_tables(store, outputs, comparable=True)
        members = [per_seed(store, f"outer-{name}") for name in SPLITS]
        factorial = per_seed(store, COMPLETE)
    by_id = {t.table_id: t.frame for t in tables}
    outer = by_id["sec-5.5-cub-factorial"]
    for arm in ("E_R", "H_R", "E_S", "H_S"):
        # Hand computation: each split's arm mean over its seeds, then mean and sample SD over the splits.
        split_means = [m.filter(pl.col("arm") == arm)["hier_mAP"].mean() for m in members]
        row = outer.filter((pl.col("row") == arm) & (pl.col("column") == "hier_mAP")).row(0, named=True)
        assert row["measured"] == pytest.approx(statistics.fmean(split_means), abs=1e-12)
        assert row["seed_sd"] == pytest.approx(statistics.stdev(split_means), abs=1e-12)
        assert row["n"] == 3
        main = by_id["main-1"].filter((pl.col("row") == arm) & (pl.col("column") == "hier_mAP")).row(0, named=True)
        seeds = factorial.filter(pl.col("arm") == arm)["hier_mAP"].to_list()
        assert main["measured"] == pytest.approx(statistics.fmean(seeds), abs=1e-12)
        assert main["seed_sd"] == pytest.approx(statistics.stdev(seeds), abs=1e-12)
    effects = by_id["sec-5.2"].filter(pl.col("dataset") == "cub")
    assert effects["published"].null_count() == 0 and effects["comparable"].all()
    # Beside each value, the paper's (its registered query-micro CUB endpoint, not the post-hoc macro).
    paper = paper_long("main-1").filter((pl.col("dataset") == "cub") & (pl.col("column") == "hier_mAP"))
    for arm, value in paper.select("arm", "value").iter_rows():
        shown = by_id["main-1"].filter((pl.col("row") == arm) & (pl.col("column") == "hier_mAP")).row(0, named=True)
        assert shown["published"] == value and shown["difference"] == pytest.approx(shown["measured"] - value, abs=1e-15)
    s4 = paper_long("S4").filter((pl.col("effect") == "loss_E") & (pl.col("column") == "seed_42"))
    shown = by_id["S4"].filter(pl.col("row") == "loss_E seed 42").row(0, named=True)
    assert shown["published"] == s4["value"][0]
    # A dataset left out: its tables are named, not written.
    assert omitted["S5"] == "needs factorial-nabirds" and "S5" not in by_id
    assert {spec.table_id for spec in TABLES} == set(by_id) | set(omitted)
    # With why a stage is absent (replicate: its dataset's folder was not given), said after it.
    with Store(outer_family, read_only=True) as store:
        _, told = replication_tables(
            store, outputs, comparable=True, absent={"factorial-nabirds": "no --nabirds folder given"}
        )
    assert told["S5"] == "needs factorial-nabirds: no --nabirds folder given"


def test_written_tables_are_byte_identical_and_name_what_is_omitted(outer_family, tmp_path):
    outputs = {"factorial-cub": {"factorial": COMPLETE}}
    with Store(outer_family, read_only=True) as store:
        tables, omitted = replication_tables(store, outputs, comparable=False)
    rows = [(t.table_id, t.title, t.frame) for t in tables]
    (tmp_path / "a").mkdir()
    killed = tmp_path / "a" / ".main-1.csv.x1y2z3.tmp"  # what a run killed mid-write leaves
    killed.write_text("half a table")
    first = write_tables(rows, omitted, tmp_path / "a", comparable=False)
    assert not killed.exists()
    second = write_tables(rows, omitted, tmp_path / "b", comparable=False)
    assert sorted(first) == sorted(second)
    assert all(first[n].read_bytes() == second[n].read_bytes() for n in first)
    assert {"main-1.csv", "main-1.md", "main-1.tex", "index.md"} <= set(first)
    index = first["index.md"].read_text()
    assert "- sec-5.5-cub-factorial: omitted (needs families-cub)" in index and "Smoke scale" in index
    assert not pl.read_csv(first["main-1.csv"])["comparable"].any()
