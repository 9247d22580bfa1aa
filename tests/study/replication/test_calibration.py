"""The replication's calibration: stored once and reused, measured again when what it depends on changes;
the replication room's estimate (`estimate`) from the stored work, calibration and stage records; the
calibration measured in-process; each stage's work counted from its plan, by hand."""

from __future__ import annotations

import pytest

from hierconsole.config.family import load_family, resolve_family
from hierconsole.config.files import load_preset
from hierconsole.study.db.calibrations import put_replication_work
from hierconsole.study.db.replications import put_stage
from hierconsole.study.db.storage import Store
from hierconsole.study.replication import estimate as read_estimate
from hierconsole.study.replication.calibration import calibration_key, described, ensure_calibration
from hierconsole.study.replication.costs import MEASURED, Phase, StageWork, UnitCosts, predicted_seconds
from hierconsole.study.replication.graph import StageState
from hierconsole.study.replication.stages import SMOKE, STAGE_RUNS, paper_stages, run_overrides
from hierconsole.study.replication.work import DatasetSize, stage_work, study_phases
from tests.stores.layouts import make_cub, tiny_model

UNITS = UnitCosts(
    command_start=0.5, worker_start=2.0, cell_update=1e-3, comparison=1e-6, image=0.1, backbone=3.0, cores=2
)
SHAPE = {"batch": 16, "hidden": 256, "out_dim": 32, "cells": 4, "supcon_cells": 2, "threads": 1, "gallery": 22}


def test_the_calibration_is_measured_once_then_reused_and_again_for_another_model(tmp_path):
    home = tmp_path / "home"
    runs: list[str] = []

    def measure() -> UnitCosts:
        runs.append("measured")
        return UNITS

    first = ensure_calibration(lambda: Store(home), described("vitb14", SHAPE), measure)
    again = ensure_calibration(lambda: Store(home), described("vitb14", SHAPE), measure)
    assert first.measured_now and not again.measured_now and again.units == UNITS and len(runs) == 1
    assert again.key == first.key and again.measured_at is not None
    other = ensure_calibration(lambda: Store(home), described("vitl14", SHAPE), measure)
    wider = ensure_calibration(lambda: Store(home), described("vitb14", {**SHAPE, "batch": 128}), measure)
    assert other.measured_now and wider.measured_now and len(runs) == 3
    assert len({first.key, other.key, wider.key}) == 3
    description = described("vitb14", SHAPE)
    assert {"machine", "cores", "python", "torch", "model", "shape"} <= set(description)
    assert calibration_key({**description, "machine": "another-box x86_64"}) != first.key


def test_the_read_layer_estimates_from_the_stored_work_and_refines_from_a_recorded_stage(tmp_path):
    home = tmp_path / "home"
    work = {
        "extract-cub": StageWork(torch_commands=1, images=100),  # 12 s calibrated
        "import-cub": StageWork(commands=1),  # 0.5 s
    }
    calibrated = ensure_calibration(lambda: Store(home), described("vitb14", SHAPE), lambda: UNITS)
    with Store(home) as store:
        assert read_estimate.replication_estimate(store, "r1") is None  # never planned here
        put_replication_work(store, "r1", calibrated.key, {n: w.to_json() for n, w in work.items()})
        before = read_estimate.replication_estimate(store, "r1")
        put_stage(store, "r1", "extract-cub", "done", "k", {"features": "x"}, 36.0)  # 3x the prediction
        after = read_estimate.replication_estimate(store, "r1")
    assert before is not None and before.total == pytest.approx(12.5)
    assert after is not None and [s.stage for s in after.stages] == ["import-cub"]
    assert after.total == pytest.approx(0.5 * 36.0 / 12.0)
    with Store(home) as store:
        forced = read_estimate.replication_estimate(store, "r1", left=["extract-cub", "import-cub"])
    assert forced is not None and forced.stages[0].source == MEASURED and forced.stages[0].seconds == 36.0
    assert read_estimate.DONE == StageState.DONE


def test_a_smoke_factorial_counts_its_jobs_updates_and_pairs_by_hand():
    (run,) = STAGE_RUNS["factorial-cub"]
    preset = load_preset(run.preset).with_overrides(values=run_overrides(run, SMOKE))
    tune, final, evaluation = study_phases(preset, DatasetSize(images=96, official_train=64))
    # Official split: 64 development images, 32 test. Validation holds round(0.2 x 64) = 13 of them.
    # Tuning: 2 candidates x (1 epoch x floor(51 / 16) = 3 updates x 2 tuned SupCon cells); validation
    # scores round(13 x 0.2) = 3 queries against the other 10, once per tuned cell.
    assert tune == Phase(jobs=2, slots=preset.compute.max_parallel_jobs, updates=1 * 3 * 2, comparisons=2 * 3 * 10)
    cells = len(preset.cells) + ("hier_style" in preset.evaluation.baselines)
    # Final: 2 seeds x (2 epochs x floor(64 / 16) = 4 updates x cells), validated every epoch.
    assert final.jobs == 2 and final.updates == 2 * 4 * cells and final.comparisons == 2 * cells * 3 * 10
    # Evaluation: every model and untrained baseline on 3 perturbations of 10 queries x 22 gallery items.
    untrained = sum(b in ("frozen", "pca") for b in preset.evaluation.baselines)
    assert evaluation == Phase(jobs=1, slots=1, comparisons=(2 * cells + untrained) * 3 * 10 * 22, warm=1)
    assert tune.warm == 0 and final.warm == 2  # forked by the standby the tuning waited for
    assert predicted_seconds(StageWork(phases=(tune, final, evaluation)), UNITS) > 0


def test_a_family_stage_pools_its_members_and_the_post_hoc_rescore_reconciles_after_it():
    sizes = {"cub": DatasetSize(images=96, official_train=64)}
    work = stage_work(paper_stages(frozenset(sizes)), SMOKE, sizes, builds_taxonomy=True)
    # families-cub runs two families (outer-split arms, then the factorial per split), each of whose
    # members' finals run together on the family's slots, then their evaluations.
    expected = []
    for run in STAGE_RUNS["families-cub"]:
        family = load_family(resolve_family(run.preset)).with_overrides(run_overrides(run, SMOKE))
        seeds, studies = len(family.members[0].preset.training.seeds), len(family.members)
        expected += [(studies * seeds, 3), (studies, 3)]  # every member's seeds, then every evaluation
    assert [(p.jobs, p.slots) for p in work["families-cub"].phases] == expected
    # S11's re-score runs the factorial's evaluation again (waiting for the standby), then its reconciliation
    # (forked by the ready standby).
    (run,) = STAGE_RUNS["factorial-cub"]
    evaluation = study_phases(load_preset(run.preset).with_overrides(values=run_overrides(run, SMOKE)), sizes["cub"])[-1]
    assert work["rescore-cub"].phases == (
        Phase(jobs=1, slots=1, comparisons=evaluation.comparisons),
        Phase(jobs=1, slots=1, comparisons=evaluation.comparisons, warm=1),
    )


@pytest.mark.slow
def test_the_calibration_measures_this_machines_unit_costs_in_process(tmp_path):
    pytest.importorskip("transformers", reason="the 'extract' extra is not installed")
    from hierconsole.study.replication.calibration import measure

    layout = make_cub(tmp_path, families=1, genera=1, species=1, per_class=3)
    model = tiny_model(tmp_path)
    images = sorted((layout.root / "images").rglob("*.png"))
    preset = load_preset("cub-tune").with_overrides(values={"training.batch_size": 16})
    units = measure(preset, str(model), 50, images)
    for unit in ("worker_start", "cell_update", "comparison", "backbone", "image"):
        assert getattr(units, unit) > 0, unit
    assert units.command_start == 0.0  # the stages' commands run in-process: no child start-up
