"""A study with baseline arms (evaluation.baselines): scored once per Q/G perturbation after the lock, stored
as arms of no seed, shown without a SD, paired with every seed in contrasts, audited (pca fit)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
import torch

from hierconsole.contract import layout
from hierconsole.engine.geometry import Euclidean
from hierconsole.engine.retrieval import evaluate
from hierconsole.locations import job_dir
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.audits import baselines as baseline_checks
from hierconsole.study.analysis.audits import seal
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.db import ids, split_files
from hierconsole.study.db.catalog import load_dataset, register_dataset
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read import baselines, job_rows, per_seed, table_frame
from hierconsole.study.read.audits import evaluate as audit
from hierconsole.study.read.audits import stored_audits
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.vocabulary import BASELINE_SEED, HIER_METRIC, RANKING_METRICS, RECALL_KS
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # worker processes

QG_SEEDS = [42, 2024]


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_fs):
    home = tmp_path_factory.mktemp("baselines") / "home"
    preset = tiny_preset(
        **{
            "evaluation.baselines": ["pca", "frozen"],
            "evaluation.qg_seeds": QG_SEEDS,
            "training.cells": ["E_R", "E_S"],
        }
    )
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")
        Orchestrator(store, max_parallel=2).run_until_idle()
    return home, study_id


def _split(home, study_id, role):
    with np.load(split_files.split_file(home, study_id, role)) as z:
        return {k: z[k] for k in z.files}


def test_baselines_are_stored_once_per_perturbation_and_pass_the_audits(study):
    home, study_id = study
    with Store(home) as store:
        assert get_study(store, study_id).phase == "complete"
        rows = store.rows(
            "SELECT arm, run_id, seed, perturbation, count(*) FROM metrics WHERE study_id = ? AND arm IN ('frozen', 'pca') "
            "GROUP BY ALL ORDER BY ALL",
            [study_id],
        )
        assert [(a, r, s, p) for a, r, s, p, _ in rows] == [
            (arm, ids.baseline_run_id(study_id, arm), BASELINE_SEED, p)
            for arm in ("frozen", "pca")
            for p in QG_SEEDS
        ]
        checks = {c.name: c for c in stored_audits(store, study_id)}
        assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
        assert "4 final cells and 2 baselines" in checks["qg_splits_identical"].evidence
        assert "none of the 160 official-test samples" in checks["pca_fitted_on_training_only"].evidence
        # The evaluation's progress counts the baselines' perturbations with the cells'.
        evaluation = next(j for j in job_rows(store, study_id) if j.job_id == ids.evaluate_job_id(study_id))
        assert evaluation.done == evaluation.total == (4 + 2) * len(QG_SEEDS)
        # The trained arms' tables hold no baseline row; the baselines have their own.
        assert sorted(per_seed(store, study_id)["arm"].unique().to_list()) == ["E_R", "E_S"]
        table = baselines(store, study_id)
        assert table is not None and table["arm"].to_list() == ["frozen", "pca"]


def _reference_metrics(z_test, test_idx, labels, parts):
    qpos, gpos = np.searchsorted(test_idx, parts["query"]), np.searchsorted(test_idx, parts["gallery"])
    return evaluate(
        torch.from_numpy(z_test[qpos]),
        torch.from_numpy(z_test[gpos]),
        labels[parts["query"]],
        labels[parts["gallery"]],
        Euclidean(),
    ).aggregate("micro")


def test_baseline_values_are_the_reference_computation_on_the_studys_splits(study, tiny_fs):
    """frozen: the test features normalised in numpy; pca: an eigendecomposition of the covariance of the
    study's final training samples, written out here; both scored on the study's own Q/G files."""
    home, study_id = study
    protocol = _split(home, study_id, split_files.PROTOCOL)
    fitted = _split(home, study_id, split_files.FINAL_TRAIN)["fit"]
    assert not np.isin(fitted, protocol["test"]).any()
    with Store(home) as store:
        preset = get_study(store, study_id).preset
        fs = load_dataset(store, "tiny")
        stored = {
            (arm, p, level, metric): v
            for arm, p, level, metric, v in store.rows(
                "SELECT arm, perturbation, level, metric, value FROM metrics WHERE study_id = ? AND seed = ?",
                [study_id, BASELINE_SEED],
            )
        }
    test_idx = np.unique(
        np.concatenate(
            [
                np.concatenate([q["query"], q["gallery"]])
                for q in (_split(home, study_id, split_files.qg_role(s)) for s in QG_SEEDS)
            ]
        )
    )
    x = fs.features[test_idx].astype(np.float64)
    frozen = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    train = fs.features[fitted].astype(np.float64)
    mean = train.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(train, rowvar=False))
    axes = vectors[:, np.argsort(values)[::-1][: preset.training.out_dim]].T
    axes *= np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])[:, None]
    pca = ((x - mean) @ axes.T).astype(np.float32)
    emb_dir = job_dir(home, ids.evaluate_job_id(study_id)) / layout.EMBEDDINGS
    np.testing.assert_allclose(np.load(emb_dir / "baseline__pca.npy"), pca, atol=1e-5)
    for arm, z in (("frozen", frozen), ("pca", pca)):
        for p in QG_SEEDS:
            ref = _reference_metrics(z, test_idx, fs.labels, _split(home, study_id, split_files.qg_role(p)))
            for level, metrics in ref.items():
                for metric in RANKING_METRICS:
                    assert stored[(arm, p, level, metric)] == pytest.approx(metrics[metric], abs=1e-5), (
                        arm,
                        p,
                        level,
                    )


def test_arm_table_contrasts_and_export_carry_the_baselines(study):
    home, study_id = study
    with Store(home) as store:
        seeds = per_seed(store, study_id)
        base = baselines(store, study_id)
        arms_export = table_frame(store, "arms", study_id)
        recall_export = table_frame(store, "recall", study_id)
        deviation = table_frame(store, "deviation", study_id)
    assert base is not None
    table = arm_table(seeds, HIER_METRIC, baselines=base)
    frozen = table.filter(pl.col("arm") == "frozen").row(0, named=True)
    assert frozen["sd"] is None and frozen["n"] is None
    assert frozen["mean"] == base.filter(pl.col("arm") == "frozen")[HIER_METRIC].item()
    # Each seed's arm is paired with the one baseline value.
    effects = simple_effects(seeds, HIER_METRIC, baselines=base)[HIER_METRIC]
    e = effects["E_S_vs_frozen"]
    assert e.definition == "E_S - frozen"
    by = {r["seed"]: r[HIER_METRIC] for r in seeds.filter(pl.col("arm") == "E_S").iter_rows(named=True)}
    assert e.per_unit == {s: v - frozen["mean"] for s, v in by.items()}
    assert "E_S_vs_pca" in effects and "geom_S" not in effects  # no H_S cell in this study
    assert arms_export["arm"].to_list() == ["E_R", "E_S", "frozen", "pca"]
    assert arms_export.filter(pl.col("arm") == "pca")["n"].to_list() == [None]
    # The deviation table: each arm's leaf, middle and high mAP and R@K in one row, the same numbers as
    # the arms and recall tables.
    assert deviation["arm"].to_list() == ["E_R", "E_S", "frozen", "pca"]
    for arm in deviation["arm"]:
        row = deviation.filter(pl.col("arm") == arm).row(0, named=True)
        arms_row = arms_export.filter(pl.col("arm") == arm).row(0, named=True)
        for level in ("leaf", "middle", "high"):
            assert row[f"{level}_mAP_mean"] == arms_row[f"{level}_mAP_mean"]
            recall_row = recall_export.filter((pl.col("arm") == arm) & (pl.col("level") == level)).row(0, named=True)
            for k in RECALL_KS:
                assert row[f"{level}_R@{k}_mean"] == recall_row[f"R@{k}_mean"]
                assert row[f"{level}_R@{k}_sd"] == recall_row[f"R@{k}_sd"]


def test_a_pca_fit_on_other_samples_fails_its_audit(study, tmp_path):
    home, study_id = study
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    with Store(copy) as store:
        assert audit(store, study_id, baseline_checks.pca_fitted_on_training_only).ok
        (payload,) = store.rows(
            "SELECT payload FROM events WHERE job_id = ? AND kind = 'baseline'",
            [ids.evaluate_job_id(study_id)],
        )[0]
        fit = json.loads(payload)
        store.write(
            lambda con: con.execute(
                "UPDATE events SET payload = ? WHERE job_id = ? AND kind = 'baseline'",
                [
                    json.dumps({**fit, "fitted_sha256": "0" * 64, "test_overlap": 3}),
                    ids.evaluate_job_id(study_id),
                ],
            )
        )
        check = audit(store, study_id, baseline_checks.pca_fitted_on_training_only)
        assert check.ok is False
        assert (
            "not the 260 training samples" in check.evidence
            and "3 fitted samples are official-test" in check.evidence
        )
        # A baseline that lacks a perturbation fails the Q/G audit like a cell would.
        store.write(
            lambda con: con.execute(
                "DELETE FROM metrics WHERE run_id = ? AND perturbation = ?",
                [ids.baseline_run_id(study_id, "frozen"), 42],
            )
        )
        qg = audit(store, study_id, seal.qg_splits_identical)
        assert qg.ok is False and "evaluate/frozen lacks Q/G perturbation(s) 42" in qg.evidence


def test_effects_command_shows_baselines_without_sd(study):
    home, study_id = study
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "hierconsole",
            "--home",
            str(home),
            "effects",
            study_id,
            "--metric",
            "hier_mAP",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "frozen, pca: one value each (no training seed, no SD)" in text
    assert "E_S_vs_frozen" in text
    assert "do not depend on the training seed" in text
