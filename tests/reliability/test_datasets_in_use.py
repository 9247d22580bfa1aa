"""A dataset that studies use is never swapped or deleted under them; a job refuses data it was not made for."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from hierconsole.datasets import make_synthetic
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from tests.reliability.conftest import cli, one_line_error, tree_digest
from tests.stores.fixed import COMPLETE, LIVE
from tests.tiny import TINY, tiny_preset

pytestmark = pytest.mark.slow  # worker processes and the CLI in subprocesses


def _generic_files(folder, fs):
    """`fs` as the files `hierconsole import generic` takes."""
    folder.mkdir()
    np.save(folder / "features.npy", fs.features)
    splits = {0: "train", 1: "val", 2: "test"}
    leaves = fs.taxonomy.leaves
    (folder / "labels.csv").write_text(
        "id,leaf,split\n"
        + "".join(f"{i},{leaves[leaf]},{splits[int(sp)]}\n" for i, leaf, sp in zip(fs.ids, fs.leaf, fs.split, strict=True))
    )
    (folder / "tax.csv").write_text("leaf,middle,high\n" + "".join(f"{a},{b},{c}\n" for a, b, c in fs.taxonomy.rows()))
    return [str(folder / n) for n in ("features.npy", "labels.csv", "tax.csv")]


def test_import_replace_of_a_dataset_in_use_is_refused_naming_the_studies(fixed_copy, tmp_path):
    other = make_synthetic(replace(TINY, n_train=80, n_test=40, dim=16))
    before = tree_digest(fixed_copy)
    done = cli(fixed_copy, "import", "generic", *_generic_files(tmp_path / "other", other), "--name", "tiny", "--replace")
    text = one_line_error(done)
    assert "cannot replace dataset 'tiny'" in text and COMPLETE in text and LIVE in text
    assert "another --name" in text
    assert tree_digest(fixed_copy) == before


def test_datasets_delete_is_refused_while_used(fixed_copy):
    text = one_line_error(cli(fixed_copy, "datasets", "delete", "tiny", "--yes"))
    assert "cannot delete dataset 'tiny'" in text and "2 studies use it" in text
    assert (fixed_copy / "datasets" / "tiny").is_dir()


def test_a_job_refuses_data_other_than_its_studys(tmp_path, tiny_fs):
    """Swapped behind the store's back (files copied over): the worker stops with a clear message."""
    home = tmp_path / "home"
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, tiny_preset(epochs=1, seeds=(42,)), "tiny")
    # Another consistent feature set under the same name, written over the registered folder.
    make_synthetic(replace(TINY, seed=TINY.seed + 1)).save(home / "datasets" / "tiny")
    manifest = json.loads((home / "datasets" / "tiny" / "manifest.json").read_text())
    with Store(home) as store:
        Orchestrator(store, max_parallel=1).run_until_idle()
        state, error = store.one("SELECT state, error FROM jobs WHERE study_id = ? AND kind = 'final'", [study_id])
    assert state == "failed"
    assert "not the data the study was created with" in error and manifest["sha256"][:12] in error
    assert "Traceback" not in error and "re-import the original" in error
