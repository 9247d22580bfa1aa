"""The temperature-tuning and retraining audits (paper S6, S12) on a real tuned study: each passes on the
run as made and fails, naming the run and the value, when one recorded fact in a copy of its store is
made wrong."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable

import duckdb
import pytest

from hierconsole.contract import layout
from hierconsole.locations import db_path, job_dir
from hierconsole.study.db.storage import Store
from tests.stores.real import cli, registered_home
from tests.tiny import TINY_VALUES

pytestmark = pytest.mark.slow  # worker processes

NEW_CHECKS = (
    "final_runs_complete",
    "tuning_same_init",
    "tuning_same_batch_order",
    "tuning_same_parameters",
    "tuning_checkpoints_not_reused",
    "finals_retrained_from_scratch",
    "lock_hash_matches",
)
TUNED = {
    **TINY_VALUES,
    "training.cells": ["E_R", "E_S", "H_S"],
    "temperature.euclidean": "tune",
    "temperature.poincare": "tune",
    "temperature.tuning.candidates": [0.1, 0.5],
    "temperature.tuning.epochs": 2,
}


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_fs):
    home = registered_home(tmp_path_factory.mktemp("tuned-home"), tiny_fs)
    sets = [a for k, v in TUNED.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    done = cli(home, "run", "demo", "--epochs", "2", "--seeds", "42,2024", *sets, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(home, read_only=True) as store:
        study_id = store.one("SELECT study_id FROM studies")[0]
    return home, study_id


def _audit(home, study_id) -> tuple[int, dict[str, tuple[str, str]]]:
    """`audit --recheck`: its exit status and check -> (result, evidence) as printed."""
    done = cli(home, "audit", study_id, "--recheck", columns=600)
    rows = {}
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 3 and cells[0] in NEW_CHECKS:
            rows[cells[0]] = (cells[1], cells[2])
    return done.returncode, rows


def test_the_tuned_run_passes_every_new_check(study, tmp_path):
    home, study_id = study
    # A copy, as the tampering tests use: the checks read the copy's own folders.
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    code, rows = _audit(copy, study_id)
    assert code == 0, rows
    assert set(rows) == set(NEW_CHECKS)
    assert all(result == "pass" for result, _ in rows.values()), rows
    assert "4 candidate runs" in rows["tuning_same_init"][1]
    assert "6/6 final runs verified (2 seeds x 3 cells" in rows["final_runs_complete"][1]
    assert "seed 42 starts from the tuning candidates' fresh state" in rows["finals_retrained_from_scratch"][1]


def _tune_run(con, study_id) -> str:
    return con.execute(
        "SELECT run_id FROM runs WHERE study_id = ? AND kind = 'tune' ORDER BY run_id LIMIT 1", [study_id]
    ).fetchone()[0]


def _repoint_evaluation(home, study_id, con) -> None:
    """The evaluation spec loads one model from a tuning job's folder instead of its final job's."""
    tune_job = con.execute(
        "SELECT job_id FROM jobs WHERE study_id = ? AND kind = 'tune' ORDER BY job_id LIMIT 1", [study_id]
    ).fetchone()[0]
    path = layout.spec_path(job_dir(home, f"{study_id}/evaluate"))
    spec = json.loads(path.read_text())
    model = spec["models"][0]
    model["weights"] = str(job_dir(home, tune_job) / model["weights"].rsplit("/", 1)[-1])
    path.write_text(json.dumps(spec))


TAMPERS: dict[str, tuple[str, Callable, str]] = {
    "init": (
        "tuning_same_init",
        lambda home, sid, con, run: con.execute("UPDATE runs SET init_sha256 = 'badbadbadbad0' WHERE run_id = ?", [run]),
        "starts from badbadbadbad, the other candidates from",
    ),
    "batches": (
        "tuning_same_batch_order",
        lambda home, sid, con, run: con.execute(
            "UPDATE epochs SET batch_sha256 = 'badbadbadbad0' WHERE run_id = ? AND epoch = 2", [run]
        ),
        "epoch 2:",
    ),
    "parameters": (
        "tuning_same_parameters",
        lambda home, sid, con, run: con.execute("UPDATE runs SET trainable_params = 7 WHERE run_id = ?", [run]),
        "has 7",
    ),
    "reused state": (
        "tuning_checkpoints_not_reused",
        lambda home, sid, con, run: con.execute(
            "UPDATE runs SET final_sha256 = (SELECT final_sha256 FROM runs WHERE run_id = ?) WHERE run_id = ?",
            [run, f"{sid}/final-s2024/E_S"],
        ),
        "final-s2024/E_S ends in the state of tuning run",
    ),
    "reused file": (
        "tuning_checkpoints_not_reused",
        lambda home, sid, con, run: _repoint_evaluation(home, sid, con),
        "from tuning job",
    ),
    "continued": (
        "finals_retrained_from_scratch",
        lambda home, sid, con, run: con.execute(
            "DELETE FROM epochs WHERE run_id = ? AND epoch = 1", [f"{sid}/final-s2024/E_R"]
        ),
        "final-s2024/E_R recorded epochs [2]",
    ),
    "extra updates": (
        "finals_retrained_from_scratch",
        lambda home, sid, con, run: con.execute(
            "UPDATE epochs SET updates = updates + 100 WHERE run_id = ?", [f"{sid}/final-s42/H_S"]
        ),
        "final-s42/H_S had made",
    ),
    "missing run": (
        "final_runs_complete",
        lambda home, sid, con, run: con.execute("DELETE FROM runs WHERE run_id = ?", [f"{sid}/final-s2024/H_S"]),
        "seed 2024 has no final run of H_S",
    ),
    "changed after lock": (
        "lock_hash_matches",
        lambda home, sid, con, run: con.execute(
            "UPDATE splits SET sha256 = 'f00' WHERE study_id = ? AND role = 'protocol'", [sid]
        ),
        "recorded at the lock",
    ),
}


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_each_check_fails_on_a_wrong_record(study, tmp_path, tamper):
    home, study_id = study
    name, change, expected = TAMPERS[tamper]
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    con = duckdb.connect(str(db_path(copy)))
    change(copy, study_id, con, _tune_run(con, study_id))
    con.close()
    code, rows = _audit(copy, study_id)
    assert code == 1
    result, evidence = rows[name]
    assert result == "FAIL", rows
    assert expected in evidence, evidence
