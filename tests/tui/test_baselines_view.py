"""The effects view of a study with baseline arms: their rows under the cells in the arm table, and the
level table with its two column groups (cells │ baselines), every number the read layer's."""

from __future__ import annotations

import polars as pl
import pytest

from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.read import baselines, per_seed
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from tests.tiny import tiny_preset
from tests.tui.conftest import make_app, settle, shown

pytestmark = pytest.mark.slow  # worker processes

WIDE = (140, 60)  # every column of the level table in view


@pytest.fixture(scope="module")
def baseline_home(tmp_path_factory, tiny_fs):
    home = tmp_path_factory.mktemp("tui-baselines") / "home"
    preset = tiny_preset(
        **{
            "evaluation.baselines": ["frozen", "pca", "hier"],
            "evaluation.qg_seeds": [42, 2024],
            "training.cells": ["E_R", "H_S"],
            "training.val_every": 0,
            "baselines.hier.proxies": 12,
            "baselines.hier.triplets_per_anchor": 3,
            "baselines.hier.topk": 4,
        }
    )
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")
        Orchestrator(store, max_parallel=2).run_until_idle()
    return home, study_id


async def test_effects_view_shows_the_baselines_beside_the_cells(baseline_home):
    home, study_id = baseline_home
    with Store(home) as store:
        table = per_seed(store, study_id)
        base = baselines(store, study_id)
        assert base is not None
        levels = [f"{lv}_mAP" for lv in ("leaf", "middle", "high")] + ["hier_mAP"]
        means = arm_table(table, levels, baselines=base)
        app = make_app(store, study=study_id)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            text = shown(app)
    assert "Levels · mAP: cells │ baselines" in text
    assert "level E_R H_S frozen pca hier" in text
    value = {(r["arm"], r["metric"]): r["mean"] for r in means.iter_rows(named=True)}
    for level in ("leaf", "middle", "high", "hier"):
        row = " ".join(
            f"{value[(a, f'{level}_mAP')]:.4f}" for a in ("E_R", "H_S")
        ) + " " + " ".join(f"{value[(b, f'{level}_mAP')]:.4f}" for b in ("frozen", "pca", "hier"))
        assert f"{level} {row}" in text, level
    # The arm table: frozen and pca once with no SD, hier per seed with mean ± SD like a cell.
    frozen = base.filter(pl.col("arm") == "frozen")["hier_mAP"].item()
    assert f"frozen · · {frozen:.4f} (no SD)" in text
    hier = means.filter((pl.col("arm") == "hier") & (pl.col("metric") == "hier_mAP")).row(0, named=True)
    assert f"{hier['mean']:.4f} ± {hier['sd']:.4f}" in text
    assert "hier is trained in each seed's job (mean ± SD)" in text
