"""A study whose HIER-style arm trains by the authors' recipe (the default): it runs end to end, is scored in
its own ball beside the cells, and the audits that compare the cells name it as exempt ("not applicable:
authors' recipe") while its update budget and its own head's parameter count are checked, and the cells'
checks still pass."""

from __future__ import annotations

import numpy as np
import pytest

from hierconsole.study.analysis.audits.baselines import authors_head_trainable
from hierconsole.study.analysis.audits.fairness import EXEMPT_CHECKS
from hierconsole.study.db import split_files
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read.audits import run_audits
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.vocabulary import HIER_AUTHORS, HIER_AUTHORS_EXEMPT, HIER_STYLE
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # worker processes

SEEDS = (42, 2024)
EPOCHS = 2


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_fs):
    home = tmp_path_factory.mktemp("hier-authors") / "home"
    preset = tiny_preset(
        epochs=EPOCHS,
        seeds=SEEDS,
        **{
            "evaluation.baselines": ["hier", "frozen"],
            "evaluation.qg_seeds": [42],
            "training.cells": ["E_R", "H_S"],
            "baselines.hier.batch_size": 24,
            "baselines.hier.embedding": 16,
            "baselines.hier.proxies": 12,
            "baselines.hier.triplets_per_anchor": 3,
            "baselines.hier.topk": 4,
        },
    )
    assert preset.baselines.hier.recipe == HIER_AUTHORS  # the default
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")
        Orchestrator(store, max_parallel=2).run_until_idle()
    return home, study_id


def test_the_authors_arm_runs_end_to_end_and_is_scored(study):
    home, study_id = study
    with Store(home) as store:
        assert get_study(store, study_id).phase == "complete"
        runs = store.rows(
            "SELECT seed, trainable_params, updates FROM runs WHERE study_id = ? AND kind = 'final' AND arm = ? "
            "ORDER BY seed",
            [study_id, HIER_STYLE],
        )
        with np.load(split_files.split_file(home, study_id, split_files.final_train_role(get_study(store, study_id).preset))) as z:
            n = len(z["fit"])
        assert runs == [(s, authors_head_trainable(48, 16), EPOCHS * (n // 24)) for s in sorted(SEEDS)]
        scored = store.rows(
            "SELECT DISTINCT seed FROM metrics WHERE study_id = ? AND arm = ? ORDER BY seed", [study_id, HIER_STYLE]
        )
        assert scored == [(s,) for s in sorted(SEEDS)]


def test_audits_name_the_exemption_and_check_the_rest(study):
    home, study_id = study
    with Store(home) as store:
        checks = {c.name: c for c in run_audits(store, study_id)}
    assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
    for name in EXEMPT_CHECKS:
        assert f"{HIER_STYLE} (" in checks[name].evidence and HIER_AUTHORS_EXEMPT in checks[name].evidence, name
    # The cells are still compared among themselves: 2 seeds x 2 cells.
    assert checks["trainable_parameters"].evidence.startswith("4 cells")
    recipe = checks["hier_authors_recipe"].evidence
    assert recipe.startswith("2 runs: their head, 784 trainable parameters") and "12 classes x 2" in recipe
    assert "(authors' recipe)" in checks["update_budget"].evidence
    assert checks["test_read_after_lock"].ok and checks["tuning_never_read_test"].ok
