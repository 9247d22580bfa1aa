"""A study with the HIER-style baseline (evaluation.baselines = ["hier"]) under the protocol-matched recipe
(the authors' recipe: tests/study/run/test_hier_authors_arm.py): a cell of each seed's final job,
scored by the evaluation on the same Q/G perturbations in HIER's own ball, stored per seed, summarised
with a SD, paired per seed in contrasts, and held to the same audits as the cells."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
import torch

from hierconsole.contract import layout
from hierconsole.engine.checkpoints import load_payload
from hierconsole.engine.retrieval import evaluate
from hierconsole.engine.trainer import build_projector, embed
from hierconsole.locations import job_dir
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.db import ids, split_files
from hierconsole.study.db.catalog import load_dataset, register_dataset
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read import baselines, job_rows, per_seed, table_frame
from hierconsole.study.read.audits import stored_audits
from hierconsole.study.run import plan
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.vocabulary import HIER_METRIC, HIER_STYLE, HIER_STYLE_LOSS, RANKING_METRICS
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # worker processes

QG_SEEDS = [42, 2024]
SEEDS = (42, 2024)


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_fs):
    home = tmp_path_factory.mktemp("hier") / "home"
    preset = tiny_preset(
        seeds=SEEDS,
        **{
            "evaluation.baselines": ["hier", "frozen"],
            "evaluation.qg_seeds": QG_SEEDS,
            "training.cells": ["E_R", "E_S"],
            "baselines.hier.recipe": "matched",
            "baselines.hier.proxies": 12,
            "baselines.hier.triplets_per_anchor": 3,
            "baselines.hier.topk": 4,
        },
    )
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")
        Orchestrator(store, max_parallel=2).run_until_idle()
    return home, study_id


def test_hier_is_a_cell_of_each_seed_and_passes_every_audit(study):
    home, study_id = study
    with Store(home) as store:
        assert get_study(store, study_id).phase == "complete"
        runs = store.rows(
            "SELECT seed, arm, loss FROM runs WHERE study_id = ? AND kind = 'final' AND arm = ? ORDER BY seed",
            [study_id, HIER_STYLE],
        )
        assert runs == [(s, HIER_STYLE, HIER_STYLE_LOSS) for s in sorted(SEEDS)]
        rows = store.rows(
            "SELECT seed, perturbation FROM metrics WHERE study_id = ? AND arm = ? GROUP BY ALL ORDER BY ALL",
            [study_id, HIER_STYLE],
        )
        assert rows == [(s, p) for s in sorted(SEEDS) for p in sorted(QG_SEEDS)]
        checks = {c.name: c for c in stored_audits(store, study_id)}
        assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
        # The same init, batch-order, budget and reload checks as the cells, over 3 cells per seed.
        assert "6 final cells and 1 baselines" in checks["qg_splits_identical"].evidence
        assert "6 cells" in checks["trainable_parameters"].evidence
        # Its test embeddings lie in HIER's ball (c = 0.1), within the bound its clip radius gives.
        (radius, bound, worst), *others = store.rows(
            "SELECT ball_radius, norm_bound, max_norm FROM runs WHERE study_id = ? AND arm = ?", [study_id, HIER_STYLE]
        )
        assert radius == pytest.approx(1 / math.sqrt(0.1)) and bound == pytest.approx(math.tanh(math.sqrt(0.1) * 2.3) / math.sqrt(0.1))
        assert 0 < worst <= bound + 1e-6 and len(others) == 1
        assert sorted(per_seed(store, study_id)["arm"].unique().to_list()) == ["E_R", "E_S"]
        # The evaluation's progress counts hier once, as a model of each seed, not again as a baseline.
        evaluation = next(j for j in job_rows(store, study_id) if j.job_id == ids.evaluate_job_id(study_id))
        assert evaluation.done == evaluation.total == (6 + 1) * len(QG_SEEDS)


def test_hier_metrics_are_its_models_ranked_in_its_own_ball(study, tiny_fs):
    """The stored values equal a re-computation from the saved final model, embedded and ranked here."""
    home, study_id = study
    with Store(home) as store:
        preset = get_study(store, study_id).preset
        fs = load_dataset(store, "tiny")
        stored = store.frame(
            "SELECT seed, perturbation, level, metric, value FROM metrics WHERE study_id = ? AND arm = ?",
            [study_id, HIER_STYLE],
        )
    cell = next(c for c in plan.final_cells(preset, {"euclidean": 0.2}) if c.arm == HIER_STYLE)
    for seed in SEEDS:
        folder = job_dir(home, ids.final_job_id(study_id, seed))
        model = build_projector(fs.features.shape[1], cell, preset.training, preset.geometry.poincare, preset.baselines.hier)
        model.load_state_dict(load_payload(folder / layout.final_model(cell))["model"])
        assert model.geometry.c == preset.baselines.hier.c == 0.1
        for qseed in QG_SEEDS:
            with np.load(split_files.split_file(home, study_id, split_files.qg_role(qseed))) as z:
                q, g = z["query"], z["gallery"]
            feats = torch.from_numpy(np.ascontiguousarray(fs.features))
            labels = torch.from_numpy(np.ascontiguousarray(fs.labels))
            zq, zg = embed(model, feats[q]), embed(model, feats[g])
            want = evaluate(zq, zg, labels[q], labels[g], model.geometry).aggregate(preset.evaluation.aggregation)
            got = stored.filter((pl.col("seed") == seed) & (pl.col("perturbation") == qseed))
            for r in got.filter(pl.col("metric").is_in(RANKING_METRICS)).iter_rows(named=True):
                assert r["value"] == pytest.approx(want[r["level"]][r["metric"]], abs=1e-5), r


def test_arm_table_and_contrasts_pair_hier_per_seed(study):
    home, study_id = study
    with Store(home) as store:
        seeds = per_seed(store, study_id)
        base = baselines(store, study_id)
        arms_export = table_frame(store, "arms", study_id)
        recall_export = table_frame(store, "recall", study_id)
    assert base is not None
    hier_rows = base.filter(pl.col("arm") == HIER_STYLE)
    assert sorted(hier_rows["seed"].to_list()) == sorted(SEEDS)
    by_seed = {r["seed"]: r[HIER_METRIC] for r in hier_rows.iter_rows(named=True)}
    table = arm_table(seeds, HIER_METRIC, baselines=base).filter(pl.col("arm") == HIER_STYLE).row(0, named=True)
    assert table["n"] == 2 and table["sd"] == pytest.approx(float(np.std(list(by_seed.values()), ddof=1)))
    effects = simple_effects(seeds, HIER_METRIC, baselines=base)[HIER_METRIC]
    e = effects["E_S_vs_hier"]
    assert e.definition == "E_S - hier" and e.n == 2
    es = {r["seed"]: r[HIER_METRIC] for r in seeds.filter(pl.col("arm") == "E_S").iter_rows(named=True)}
    assert e.per_unit == {s: es[s] - by_seed[s] for s in SEEDS}
    assert "E_R_vs_frozen" in effects
    assert arms_export["arm"].to_list() == ["E_R", "E_S", "frozen", "hier"]
    row = arms_export.filter(pl.col("arm") == HIER_STYLE).row(0, named=True)
    assert row["n"] == 2 and row["leaf_mAP_sd"] is not None and row["high_mAP_mean"] is not None
    assert set(recall_export.filter(pl.col("arm") == HIER_STYLE)["level"].to_list()) == {"leaf", "middle", "high"}


def test_a_contrast_against_hier_needs_every_seed_of_it(study):
    home, study_id = study
    with Store(home) as store:
        seeds = per_seed(store, study_id)
        base = baselines(store, study_id)
    assert base is not None
    partial = base.filter(~((pl.col("arm") == HIER_STYLE) & (pl.col("seed") == SEEDS[0])))
    effects = simple_effects(seeds, HIER_METRIC, baselines=partial)[HIER_METRIC]
    assert "E_S_vs_hier" not in effects and "E_S_vs_frozen" in effects


def test_effects_command_shows_hier_with_its_seeds(study):
    home, study_id = study
    out = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), "effects", study_id, "--metric", "hier_mAP"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    # hier is summarised over its 2 seeds like the cells (one n for all: the title says it); frozen has none.
    assert "over 2 seeds" in text and "seeds per arm" not in text
    assert "frozen: one value each (no training seed, no SD)" in text
    assert "E_S_vs_hier" in text
