"""A study that selects its epoch freezes one duration per arm from the seed-mean validation score, and
scores every seed of the arm at it: checked against a hand computation from the stored validation rows."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict

import duckdb
import pytest

from hierconsole.contract import layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.locations import db_path, job_dir
from hierconsole.study.db.storage import Store
from tests.stores.real import cli, registered_home
from tests.tiny import TINY_VALUES

pytestmark = pytest.mark.slow  # worker processes

SEEDS = (42, 2024, 3407)
CANDIDATES = (1, 2, 3, 4)
SELECTING = {
    **TINY_VALUES,
    "training.cells": ["E_R", "E_S"],
    "training.select_epoch": True,
    "training.selection_epochs": list(CANDIDATES),
    "training.lr": 0.03,  # fast enough that the tiny curves peak before the last candidate
}


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_fs):
    home = registered_home(tmp_path_factory.mktemp("durations-home"), tiny_fs)
    sets = [a for k, v in SELECTING.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    done = cli(home, "run", "demo", "--epochs", "4", "--seeds", ",".join(map(str, SEEDS)), *sets, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(home, read_only=True) as store:
        study_id = store.one("SELECT study_id FROM studies")[0]
    return home, study_id


def _by_hand(home, study_id) -> dict[str, tuple[int, float]]:
    """arm -> (epoch, seed mean) from the raw validation rows: hier score = (middle + high) / 2 per seed,
    then the plain mean over the seeds; the first epoch of the highest mean."""
    con = duckdb.connect(str(db_path(home)), read_only=True)
    rows = con.execute(
        "SELECT r.arm, r.seed, v.epoch, v.level, v.value FROM val_metrics v JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = 'final' AND v.aggregation = 'micro' AND v.metric = 'mAP'",
        [study_id],
    ).fetchall()
    con.close()
    levels: dict = defaultdict(dict)
    for arm, seed, epoch, level, value in rows:
        levels[(arm, epoch, seed)][level] = value
    means: dict = defaultdict(dict)
    for arm in ("E_R", "E_S"):
        for epoch in CANDIDATES:
            per_seed = [(levels[(arm, epoch, s)]["middle"] + levels[(arm, epoch, s)]["high"]) / 2 for s in SEEDS]
            means[arm][epoch] = sum(per_seed) / len(per_seed)
    out = {}
    for arm, by_epoch in means.items():
        best = max(by_epoch.values())
        out[arm] = (min(e for e, v in by_epoch.items() if v == best), best)
    return out


def test_one_duration_per_arm_is_the_seed_mean_argmax(study):
    home, study_id = study
    expected = _by_hand(home, study_id)
    # Not trivially the ceiling: the tiny curves peak earlier, so an argmax that took the last epoch fails.
    assert any(epoch != CANDIDATES[-1] for epoch, _ in expected.values()), expected
    with Store(home, read_only=True) as store:
        stored = {arm: (epoch, score) for arm, epoch, score in store.rows(
            "SELECT arm, epoch, score FROM arm_durations WHERE study_id = ?", [study_id]
        )}  # fmt: skip
        assert store.value("SELECT DISTINCT seeds FROM arm_durations WHERE study_id = ?", [study_id]) == 3
        evaluate = store.one("SELECT job_id FROM jobs WHERE study_id = ? AND kind = 'evaluate'", [study_id])[0]
        audit = store.one(
            "SELECT ok, evidence FROM audits WHERE study_id = ? AND check_name = 'epoch_selected_on_validation'",
            [study_id],
        )
    assert set(stored) == set(expected)
    for arm, (epoch, score) in expected.items():
        assert stored[arm][0] == epoch
        assert stored[arm][1] == pytest.approx(score, abs=1e-12)
    # Every seed of an arm is scored from its candidate checkpoint at the arm's one frozen epoch.
    spec = JobSpec.read(layout.spec_path(job_dir(home, evaluate)))
    assert sorted((m.seed, m.cell.key) for m in spec.models) == sorted((s, a) for s in SEEDS for a in stored)
    for m in spec.models:
        assert m.weights.endswith(f"/candidate-{m.cell.key}-e{stored[m.cell.key][0]}.pt")
    assert audit[0] is True, audit[1]
    assert "one duration per arm from the seed-mean validation hier_mAP" in audit[1]
    # The lock deleted the candidates at every other epoch; the lock hash over the kept ones still holds.
    for m in spec.models:
        folder = (home / m.weights).parent  # stored relative to the home (a relocatable home)
        assert folder.is_dir(), folder
        kept = sorted(p.name for p in folder.glob(f"candidate-{m.cell.key}-e*.pt"))
        assert kept == [f"candidate-{m.cell.key}-e{stored[m.cell.key][0]}.pt"], kept
    with Store(home, read_only=True) as store:
        assert store.value(
            "SELECT ok FROM audits WHERE study_id = ? AND check_name = 'lock_hash_matches'", [study_id]
        ) is True


def test_the_durations_are_shown_by_runs_audit_and_export(study, tmp_path):
    home, study_id = study
    with Store(home, read_only=True) as store:
        stored = dict(store.rows("SELECT arm, epoch FROM arm_durations WHERE study_id = ?", [study_id]))
    runs = cli(home, "runs", study_id, columns=200)
    assert runs.returncode == 0, runs.stderr
    assert "durations frozen per arm" in runs.stdout
    audit = cli(home, "audit", study_id, columns=400)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    for arm, epoch in stored.items():
        assert f"{arm} epoch {epoch}" in " ".join(audit.stdout.split())
    out = tmp_path / "durations.csv"
    done = cli(home, "export", "durations", "--study", study_id, "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = out.read_text().splitlines()
    assert lines[0].split(",") == ["study_id", "arm", "epoch", "score", "seeds"]
    assert {(r.split(",")[1], int(r.split(",")[2])) for r in lines[1:]} == set(stored.items())


@pytest.mark.parametrize("tamper", ["duration", "validation"])
def test_the_audit_fails_on_a_duration_that_is_not_the_seed_mean_argmax(study, tmp_path, tamper):
    home, study_id = study
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    con = duckdb.connect(str(db_path(copy)))
    epoch = con.execute("SELECT epoch FROM arm_durations WHERE study_id = ? AND arm = 'E_S'", [study_id]).fetchone()[0]
    other = next(e for e in CANDIDATES if e != epoch)
    if tamper == "duration":
        # The frozen record claims another epoch than the stored validation curves pick.
        con.execute("UPDATE arm_durations SET epoch = ? WHERE study_id = ? AND arm = 'E_S'", [other, study_id])
    else:
        # One seed's stored validation curve now peaks far above the others at another epoch.
        con.execute(
            "UPDATE val_metrics SET value = 1.0 WHERE run_id = ? AND epoch = ? AND metric = 'mAP'",
            [f"{study_id}/final-s42/E_S", other],
        )
    con.close()
    done = cli(copy, "audit", study_id, "--recheck", columns=400)
    assert done.returncode == 1, done.stdout + done.stderr
    text = " ".join(done.stdout.replace("│", " ").split())
    assert "epoch_selected_on_validation FAIL" in text
    if tamper == "duration":
        assert f"E_S was frozen at epoch {other}" in text
        assert f"not its arm's frozen epoch {other}" in text
    else:
        assert f"put the best seed mean at epoch {other}" in text
