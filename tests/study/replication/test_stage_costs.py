"""The replication's cost model against hand arithmetic, and its refinement from recorded stages."""

from __future__ import annotations

import pytest

from hierconsole.study.replication.costs import (
    CALIBRATED,
    MEASURED,
    Phase,
    StageWork,
    UnitCosts,
    estimate,
    phase_seconds,
    predicted_seconds,
)
from hierconsole.study.replication.work import pooled

UNITS = UnitCosts(
    command_start=0.5, worker_start=2.0, cell_update=1e-3, comparison=1e-6, image=0.1, backbone=3.0, cores=2
)


def test_a_phase_shares_the_cores_after_one_start_up_of_its_standby():
    # 3 jobs of 1000 updates x 1 ms + 10^6 pairs x 1 us = 2 s each, on 3 slots but 2 cores, after the
    # standby's 2 s start-up that every launch waits for (one import, not one per job).
    phase = Phase(jobs=3, slots=3, updates=1000, comparisons=1_000_000)
    assert phase_seconds(phase, UNITS) == pytest.approx(2.0 + 3 * 2.0 / 2)
    # One slot: one job after another, each its 1 s.
    assert phase_seconds(Phase(jobs=3, slots=1, updates=1000), UNITS) == pytest.approx(2.0 + 3 * 1.0)
    # 5 jobs on 2 slots and 2 cores.
    assert phase_seconds(Phase(jobs=5, slots=2, updates=1000), UNITS) == pytest.approx(2.0 + 5 * 1.0 / 2)
    assert phase_seconds(Phase(jobs=1, slots=3), UNITS) == pytest.approx(2.0)
    assert phase_seconds(Phase(jobs=0, slots=3, updates=10), UNITS) == 0.0


def test_a_ready_standby_forks_a_later_phase_with_no_start_up():
    phase = Phase(jobs=3, slots=2, updates=1000, warm=3)
    assert phase_seconds(phase, UNITS) == pytest.approx(3 * 1.0 / 2)
    # A phase only partly forked by a ready standby (a pooled phase whose first member starts it) waits.
    assert phase_seconds(Phase(jobs=3, slots=2, updates=1000, warm=1), UNITS) == pytest.approx(2.0 + 1.5)
    # A stage pays one start-up, in its first phase: the tuning's, then the finals and the evaluation forked.
    tune, final = Phase(jobs=2, slots=2, updates=1000), Phase(jobs=2, slots=2, updates=2000, warm=2)
    evaluate = Phase(jobs=1, slots=1, comparisons=1_000_000, warm=1)
    expected = (2.0 + 2 * 1.0 / 2) + 2 * 2.0 / 2 + 1.0
    assert predicted_seconds(StageWork(phases=(tune, final, evaluate)), UNITS) == pytest.approx(expected)


def test_a_family_pools_its_members_phases_on_its_slots():
    tuned = (Phase(jobs=2, slots=3, updates=10), Phase(jobs=3, slots=3, updates=100, warm=3))
    plain = (Phase(jobs=3, slots=3, updates=40),)
    # Phases pool by position: the tuned member's tuning with the plain member's finals, then its finals.
    first, second = pooled([tuned, plain], slots=3)
    assert first == Phase(jobs=5, slots=3, updates=(2 * 10 + 3 * 40) / 5, warm=0)
    assert second == Phase(jobs=3, slots=3, updates=100, warm=3)
    # Five 1 s jobs of one member each alone on 3 slots against all of them at once: one start-up and one
    # wait on the family's cores, against five of each.
    members = [(Phase(jobs=1, slots=3, updates=1000),)] * 5
    (together,) = pooled(members, slots=3)
    assert phase_seconds(together, UNITS) == pytest.approx(2.0 + 5 * 1.0 / 2)
    assert sum(phase_seconds(m[0], UNITS) for m in members) == pytest.approx(5 * (2.0 + 1.0))


def test_a_stage_is_its_commands_images_and_phases():
    work = StageWork(
        commands=2, torch_commands=1, images=50, backbones=1, phases=(Phase(jobs=2, slots=2, updates=500),)
    )
    # 2 x 0.5 + 1 x 2.0 + 3.0 + 50 x 0.1 + (2.0 + 2 x 0.5 / 2)
    assert predicted_seconds(work, UNITS) == pytest.approx(1.0 + 2.0 + 3.0 + 5.0 + 2.5)
    assert StageWork.from_json(work.to_json()) == work
    assert UnitCosts.from_json(UNITS.to_json()) == UNITS


WORK = {
    "extract-cub": StageWork(torch_commands=1, images=100),  # 2 + 10 = 12 s
    "extract-nabirds": StageWork(torch_commands=1, images=200),  # 22 s
    "import-cub": StageWork(commands=1),  # 0.5 s
    "factorial-cub": StageWork(commands=1, phases=(Phase(jobs=1, slots=1, updates=1000),)),  # 0.5 + 3 = 3.5 s
}


def test_nothing_ran_every_stage_is_its_calibrated_prediction():
    est = estimate(WORK, WORK, UNITS, {})
    assert [(s.stage, s.source, s.scale) for s in est.stages] == [(n, CALIBRATED, 1.0) for n in WORK]
    assert est.total == pytest.approx(12 + 22 + 0.5 + 3.5)


def test_a_recorded_stage_is_its_time_and_scales_its_kind_first_then_the_rest():
    # extract-cub took 24 s where 12 were predicted: its kind runs 2x slower than calibrated.
    est = estimate(WORK, WORK, UNITS, {"extract-cub": 24.0})
    by = {s.stage: s for s in est.stages}
    assert by["extract-cub"].seconds == 24.0 and by["extract-cub"].source == MEASURED
    assert by["extract-nabirds"].seconds == pytest.approx(44.0) and by["extract-nabirds"].scaled_by == 1
    # No import has run: the ratio of all finished stages (here the one extraction) scales it.
    assert by["import-cub"].seconds == pytest.approx(1.0) and by["import-cub"].scale == pytest.approx(2.0)
    assert by["factorial-cub"].describe() == "calibrated x2.00 (1 finished)"


def test_stages_of_their_own_kind_correct_before_the_overall_ratio():
    measured = {"extract-cub": 24.0, "import-cub": 0.25}  # extraction 2x, import 0.5x
    left = ["extract-nabirds", "factorial-cub"]
    by = {s.stage: s for s in estimate(left, WORK, UNITS, measured).stages}
    assert by["extract-nabirds"].seconds == pytest.approx(44.0)
    # overall: (24 + 0.25) / (12 + 0.5)
    assert by["factorial-cub"].seconds == pytest.approx(3.5 * 24.25 / 12.5)
    assert [s.stage for s in estimate(left, WORK, UNITS, measured).stages] == left


def test_a_new_replication_learns_from_the_stages_the_home_ran_for_another():
    # Another replication's extraction took 36 s where 12 were predicted (3x); this one has run nothing.
    history = [("extract-cub", 36.0, 12.0)]
    by = {s.stage: s for s in estimate(WORK, WORK, UNITS, {}, history).stages}
    assert by["extract-nabirds"].seconds == pytest.approx(66.0) and by["extract-nabirds"].scaled_by == 1
    assert by["import-cub"].seconds == pytest.approx(1.5)  # no import ran anywhere: the home's overall 3x
    # This replication's own stages of a kind come first.
    own = {s.stage: s for s in estimate(["extract-nabirds"], WORK, UNITS, {"extract-cub": 24.0}, history).stages}
    assert own["extract-nabirds"].seconds == pytest.approx(44.0)
