"""Job specs: they carry the registered preset itself, name every input a job may read, and store paths
relative to the home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hierconsole.contract import layout
from hierconsole.contract.jobspec import JobSpec, SpecError
from hierconsole.locations import job_dir, resolve
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.read import get_study
from hierconsole.study.run.lifecycle import create_study
from hierconsole.vocabulary import ARMS, JobKind
from tests.stores.fixed import COMPLETE, SEEDS
from tests.tiny import tiny_preset


def _specs(store: Store, study_id: str) -> dict[str, JobSpec]:
    return {
        job_id: JobSpec.read(layout.spec_path(job_dir(store.home, job_id)))
        for (job_id,) in store.rows("SELECT job_id FROM jobs WHERE study_id = ? ORDER BY job_id", [study_id])
    }


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_specs_round_trip_and_carry_the_registered_preset(fixed_home):
    with Store(fixed_home) as store:
        study = get_study(store, COMPLETE)
        specs = _specs(store, COMPLETE)
    assert {s.kind for s in specs.values()} == {JobKind.FINAL, JobKind.EVALUATE}
    for spec in specs.values():
        assert JobSpec.from_dict(json.loads(spec.to_json())) == spec
        # No second copy of any option: the job's preset is the study's, hash for hash.
        assert spec.preset == study.preset and spec.preset.sha256() == study.preset_sha256
        assert spec.device == study.preset.compute.device
        assert spec.threads == study.preset.compute.threads_per_worker


def test_every_stored_path_is_relative_to_the_home(fixed_home):
    with Store(fixed_home) as store:
        specs = _specs(store, COMPLETE)
        stored = store.rows("SELECT path FROM splits") + store.rows("SELECT artifact_dir FROM datasets")
    for job_id, spec in specs.items():
        text = (job_dir(fixed_home, job_id) / layout.SPEC).read_text()
        paths = [s for s in _strings(json.loads(text)) if "/" in s and not s.startswith(COMPLETE)]
        assert paths and not [p for p in paths if Path(p).is_absolute()], paths
        here = spec.resolved(fixed_home)
        assert Path(here.dataset_dir).is_dir() and Path(here.out_dir) == job_dir(fixed_home, job_id)
        for split in [here.train_split, here.val_split, *(t.path for t in here.test_splits)]:
            assert split is None or Path(split).is_file()
    assert stored and not [p for (p,) in stored if Path(p).is_absolute()]
    assert all(resolve(fixed_home, p).exists() for (p,) in stored)


def test_the_evaluation_names_every_model_and_perturbation_it_scores(fixed_home):
    with Store(fixed_home) as store:
        spec = _specs(store, COMPLETE)[f"{COMPLETE}/evaluate"]
        finals = store.rows("SELECT run_id, seed, arm, tau FROM runs WHERE study_id = ? AND kind = 'final'", [COMPLETE])
        qg = dict(store.rows("SELECT role, path FROM splits WHERE study_id = ? AND role LIKE 'qg:%'", [COMPLETE]))
    # It needs no other job's spec: every final model, with its seed, cell and weights file, is named here.
    assert sorted((m.run_id, m.seed, m.cell.arm, m.cell.tau) for m in spec.models) == sorted(finals)
    assert len(spec.models) == len(SEEDS) * len(ARMS)
    for m in spec.models:
        job = m.run_id.rsplit("/", 1)[0]
        assert resolve(fixed_home, m.weights) == job_dir(fixed_home, job) / layout.final_model(m.cell)
    assert {f"qg:{t.seed}": t.path for t in spec.test_splits} == qg
    assert spec.rescore is None and spec.aggregation == spec.preset.evaluation.aggregation


def test_the_budget_and_the_validation_period_come_from_the_preset(tmp_path, tiny_fs):
    preset = tiny_preset(
        epochs=7,
        **{
            "temperature.euclidean": "tune",
            "temperature.tuning.candidates": [0.1, 0.5],
            "temperature.tuning.epochs": 3,
            "training.val_every": 2,
        },
    )
    with Store(tmp_path) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")
        specs = _specs(store, study_id)
        epochs_total = dict(store.rows("SELECT job_id, epochs_total FROM jobs WHERE study_id = ?", [study_id]))
    assert len(specs) == 2 and all(s.kind == JobKind.TUNE for s in specs.values())
    for job_id, spec in specs.items():
        # A tuning run is trained for the tuning budget and scored once, at its end (paper S6).
        assert spec.epochs == spec.val_every == 3 == epochs_total[job_id]
        assert [c.arm for c in spec.cells] == ["E_S"] and spec.cells[0].tau in (0.1, 0.5)
        assert spec.train_split and spec.val_split and not spec.test_splits


def test_a_spec_of_another_version_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"job_id": "s/final-s42", "kind": "final", "hyper": {"lr": 5e-5}}))
    with pytest.raises(SpecError, match=rf"{path}: job spec version 1, but this hierconsole reads version 2"):
        JobSpec.read(path)
    path.write_text("{ not json")
    with pytest.raises(SpecError, match="cannot read the job spec"):
        JobSpec.read(path)
