"""A level with no valid queries: named when the splits are made, stored, shown, and left out of the
tables while the other levels are reported.

The data: two high groups of two middles of two leaves each; the official test holds only the leaves of
one middle per high, so no test query has a same-high, other-middle positive (paper S2): high is empty.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from hierconsole.config import load_preset
from hierconsole.datasets import FeatureSet
from hierconsole.datasets.splits import empty_levels
from hierconsole.errors import InputError
from hierconsole.study import read
from hierconsole.study.analysis.per_seed import per_perturbation_from_long
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import create_study
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import empty_level_note

PER_LEAF = 12
TEST_LEAVES = (0, 1, 4, 5)  # middles m0 (high h0) and m2 (high h1)


def gap_dataset() -> FeatureSet:
    tax = Taxonomy.three(
        leaves=tuple(f"l{i}" for i in range(8)),
        middles=("m0", "m1", "m2", "m3"),
        highs=("h0", "h1"),
        leaf_middle=np.array([0, 0, 1, 1, 2, 2, 3, 3]),
        middle_high=np.array([0, 0, 1, 1]),
    )
    leaf = np.concatenate([np.repeat(np.arange(8), PER_LEAF), np.repeat(TEST_LEAVES, PER_LEAF)])
    split = np.concatenate(
        [np.zeros(8 * PER_LEAF, np.int8), np.full(len(TEST_LEAVES) * PER_LEAF, 2, np.int8)]
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((len(leaf), 16)).astype(np.float32) + leaf[:, None] * 0.1
    return FeatureSet(
        name="gap", features=x, ids=[f"s{i}" for i in range(len(leaf))], leaf=leaf, split=split,
        taxonomy=tax, kind="generic",
    )  # fmt: skip


VALUES = {
    "data.dataset": "gap",
    "evaluation.n_query": 12,
    "evaluation.baselines": ["frozen"],
    "training.hidden": 16,
    "training.out_dim": 4,
    "training.batch_size": 16,
    "compute.device": "cpu",
}


def test_the_empty_level_is_named_and_stored_before_training(tmp_path):
    with Store(tmp_path) as store:
        register_dataset(store, gap_dataset())
        study = create_study(
            store, load_preset("demo").with_overrides(epochs=1, seeds=[42], values=VALUES), "gap"
        )
        assert read.get_study(store, study).phase == "training"  # nothing has run
        stored = [
            v
            for (v,) in store.rows(
                "SELECT valid FROM splits WHERE study_id = ? AND role LIKE 'qg:%'", [study]
            )
        ]
        assert stored and all('"high": 0' in v for v in stored)
        assert read.empty_levels(store, study) == ("high",)
    assert empty_level_note("high") == "high: no valid queries in this split"


def test_empty_levels_is_any_perturbation_with_zero_valid():
    assert empty_levels([{"leaf": 3, "middle": 2, "high": 1}, {"leaf": 3, "middle": 0, "high": 1}]) == (
        "middle",
    )
    assert empty_levels([{"leaf": 3, "middle": 2, "high": 1}]) == ()


def long_rows(high_value):
    rows = []
    for arm in ("E_R", "H_R"):
        for level, value in (("leaf", 0.5), ("middle", 0.3 if arm == "E_R" else 0.4), ("high", high_value)):
            rows.append(
                {"seed": 42, "arm": arm, "perturbation": 42, "level": level, "metric": "mAP", "value": value}
            )
    return pl.DataFrame(rows, schema_overrides={"value": pl.Float64})


def test_excluded_level_leaves_the_other_levels_and_hier_of_the_rest():
    with pytest.raises(InputError, match="value of high_mAP is missing"):
        per_perturbation_from_long(long_rows(None))
    table = per_perturbation_from_long(long_rows(None), excluded=("high",))
    assert "high_mAP" not in table.columns
    assert table["hier_mAP"].to_list() == table["middle_mAP"].to_list() == [0.3, 0.4]
    full = per_perturbation_from_long(long_rows(0.7))
    assert full["hier_mAP"].to_list() == [pytest.approx(0.5), pytest.approx(0.55)]


@pytest.fixture(scope="module")
def gap_run(tmp_path_factory):
    """A home with one complete demo study on the gap data (the CLI in a subprocess) and its output."""
    home = tmp_path_factory.mktemp("gap")
    with Store(home) as store:
        register_dataset(store, gap_dataset())
    sets = [
        arg for key, value in VALUES.items() if key != "data.dataset" for arg in ("--set", f"{key}={value}")
    ]
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), "run", "demo", "--dataset", "gap",
         "--epochs", "2", "--seeds", "42", *sets],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return home, done


@pytest.mark.slow  # the CLI in a subprocess, one short training run
def test_run_reports_the_other_levels_and_names_the_empty_one(gap_run):
    tmp_path, done = gap_run
    out = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, out
    assert "Traceback" not in out and "is missing" not in out, out
    assert out.count("high: no valid queries in this split") == 2, out  # at creation and in the summary
    assert "middle" in out and "hier" in out
    with Store(tmp_path) as store:
        study = read.list_studies(store)[0].study_id
        assert read.get_study(store, study).phase == "complete"
        table = read.per_seed(store, study)
        assert (
            "high_mAP" not in table.columns and table["hier_mAP"].to_list() == table["middle_mAP"].to_list()
        )
        assert read.baselines(store, study) is not None
    # The reporting commands go on with the other levels and say why high is absent.
    export = ["export", "effects", "--study", study, "-o", str(tmp_path / "e.csv")]
    for command in (["effects", study], ["contrast", study, study], export):
        shown = subprocess.run(
            [sys.executable, "-m", "hierconsole", "--home", str(tmp_path), *command],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert shown.returncode == 0, (command, shown.stdout, shown.stderr)
        assert "high_mAP" not in shown.stdout, command
    assert "middle" in (tmp_path / "e.csv").read_text()


@pytest.mark.slow  # uses the run above
async def test_the_console_names_the_empty_level_beside_the_effects(gap_run):
    from tests.tui.conftest import SIZE, make_app, settle, shown

    home, done = gap_run
    assert done.returncode == 0
    with Store(home) as store:
        study = read.list_studies(store)[0].study_id
        app = make_app(store, study=study)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            text = shown(app)
            assert "high: no valid queries in this split" in text and "metric hier_mAP" in text, text
