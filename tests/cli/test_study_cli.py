"""The headless commands over one real study: run, runs, studies, audit, effects, export, rescore."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest

from hierconsole.cli import main
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.read.audits import CHECKS
from hierconsole.vocabulary import BASELINE_LEGEND
from tests.homes import copy_home
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # worker processes

TINY_SETTINGS = [
    "training.hidden=32",
    "training.out_dim=8",
    "training.batch_size=32",
    "training.lr=1e-3",
    "evaluation.n_query=40",
    "compute.device='cpu'",
]


def run(home, capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["--home", str(home), *argv])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


@pytest.fixture(scope="module")
def study(tmp_path_factory, trained_baselines):
    """The session's tiny study with all three baselines (tests/homes.py; the demo preset itself leaves the
    HIER-style cell out for speed), this module's own copy."""
    return copy_home(trained_baselines.home, tmp_path_factory.mktemp("cli-home") / "home"), trained_baselines.study_id


def test_run_leaves_a_complete_audited_study(study, capsys):
    home, study_id = study
    code, out, _ = run(home, capsys, "studies")
    assert code == 0 and study_id in out and "complete" in out and "3/3" in out
    code, out, _ = run(home, capsys, "runs", study_id)
    assert code == 0 and out.count("finished") == 3
    assert {"E_R", "E_S@0.2", "H_R", "H_S@0.2"} <= set(out.split())  # the cells, each whole (they may wrap)
    code, out, _ = run(home, capsys, "audit", study_id, "--recheck")
    assert code == 0 and "FAIL" not in out and out.count("pass") == len(CHECKS)


def test_the_demo_preset_shows_its_baselines_beside_the_cells(study, capsys):
    home, study_id = study
    code, out, _ = run(home, capsys, "effects", study_id, "--metric", "hier_mAP")
    text = " ".join(out.split())
    assert code == 0 and "frozen" in text and "pca" in text and "hier" in text
    assert BASELINE_LEGEND in text


def test_effects_json_export_and_sql_views_agree(study, capsys, tmp_path):
    home, study_id = study
    code, out, _ = run(home, capsys, "effects", study_id, "--json")
    assert code == 0
    doc = json.loads(out)
    # The demo preset scores the frozen, pca and hier baselines: each arm minus each follows the factorial.
    factorial = ["geom_R", "geom_S", "loss_E", "loss_H", "interaction"]
    vs_baselines = [f"{a}_vs_{b}" for b in ("frozen", "pca", "hier") for a in ("E_R", "H_R", "E_S", "H_S")]
    assert list(doc["effects"]["hier_mAP"]) == factorial
    assert list(doc["baseline_contrasts"]["hier_mAP"]) == vs_baselines
    assert {r["arm"] for r in doc["arms"]} == {"E_R", "H_R", "E_S", "H_S", "frozen", "pca", "hier"}
    hier = {**doc["effects"]["hier_mAP"], **doc["baseline_contrasts"]["hier_mAP"]}
    assert set(hier["geom_R"]["per_seed"]) == {"42", "2024"}
    for e in hier.values():
        assert e["n_seeds"] == 2
    # The interaction is the difference of the two geometry effects, seed by seed.
    for seed in ("42", "2024"):
        assert hier["interaction"]["per_seed"][seed] == pytest.approx(
            hier["geom_S"]["per_seed"][seed] - hier["geom_R"]["per_seed"][seed], abs=1e-12
        )
    target = tmp_path / "effects.parquet"
    code, out, _ = run(
        home, capsys, "export", "effects", "--study", study_id, "--format", "parquet", "-o", str(target)
    )
    assert code == 0 and str(target) in out
    frame = pl.read_parquet(target).filter(pl.col("metric") == "hier_mAP")
    for row in frame.iter_rows(named=True):
        assert row["mean"] == pytest.approx(hier[row["effect"]]["mean"], abs=1e-12)
        assert row["seed_42"] == pytest.approx(hier[row["effect"]]["per_seed"]["42"], abs=1e-12)
    # The SQL views compute the same effects in the duckdb shell.
    with duckdb.connect(str(home / "hierconsole.duckdb"), read_only=True) as con:
        rows = con.sql(
            "SELECT effect, mean, sd, positive_seeds FROM effects_summary "
            "WHERE level = 'hier' AND metric = 'mAP' AND study_id = ?",
            params=[study_id],
        ).fetchall()
    assert len(rows) == 5
    for effect, mean, sd, positive in rows:
        assert mean == pytest.approx(hier[effect]["mean"], abs=1e-12)
        assert sd == pytest.approx(hier[effect]["sd"], abs=1e-12)
        assert positive == hier[effect]["positive_seeds"]


@pytest.mark.parametrize(
    "table", ["runs", "metrics", "arms", "recall", "deviation", "redistribution", "audits", "tuning"]
)
def test_every_table_exports(study, capsys, tmp_path, table):
    home, study_id = study
    target = tmp_path / f"{table}.csv"
    code, out, err = run(home, capsys, "export", table, "--study", study_id, "-o", str(target))
    assert code == 0, err
    frame = pl.read_csv(target)
    assert frame.height == int(out.split("(")[1].split()[0])
    if table == "runs":
        # 2 seeds x (4 cells + the demo's HIER-style baseline, a cell of each seed's job)
        assert frame.height == 10 and set(frame["state"]) == {"finished"}
    if table == "audits":
        assert frame.height == len(CHECKS) and frame["ok"].all()


def test_rescore_adds_posthoc_macro_and_reconciles_micro(study, capsys):
    home, study_id = study
    with Store(home) as store:
        before = store.frame("SELECT * FROM metrics WHERE NOT posthoc ORDER BY ALL")
    code, out, err = run(home, capsys, "rescore", study_id, "--aggregate", "macro")
    assert code == 0, out + err
    assert "pass" in out
    with Store(home) as store:
        after = store.frame("SELECT * FROM metrics WHERE NOT posthoc ORDER BY ALL")
        macro = store.one("SELECT count(*), bool_and(posthoc) FROM metrics WHERE aggregation = 'macro'")
        check = store.one("SELECT ok FROM audits WHERE check_name = 'rescore_reconciles'")
    assert before.equals(after)  # the registered endpoint is untouched
    assert macro[0] > 0 and macro[1] is True
    assert check[0] is True


def test_resume_drives_work_a_console_left_queued(tmp_path, capsys, tiny_fs):
    from hierconsole.config import load_preset
    from hierconsole.study.db.records import get_study
    from hierconsole.study.run.lifecycle import create_study

    home = tmp_path / "home"
    values = dict(setting.split("=", 1) for setting in TINY_SETTINGS)
    values = {k: json.loads(v.replace("'", '"')) for k, v in values.items()}
    preset = load_preset("demo").with_overrides(epochs=1, seeds=[42], dataset="tiny", values=values)
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")  # queued, never launched
    code, out, err = run(home, capsys, "resume")
    assert code == 0, out + err
    with Store(home) as store:
        assert get_study(store, study_id).phase == "complete"
    assert run(home, capsys, "resume")[1].strip() == "nothing to resume"


def test_run_says_where_results_are_what_next_and_fits_80_columns(tmp_path, tiny_fs):
    """The run as a user meets it in an 80-column terminal: a real process, its whole output."""
    import os
    import subprocess
    import sys

    home = registered_home(tmp_path / "home", tiny_fs)
    argv = ["--home", str(home), "run", "demo", "--dataset", "tiny", "--epochs", "1", "--seeds", "42"]
    for setting in TINY_SETTINGS:
        argv += ["--set", setting]
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    lines = out.splitlines()
    # Only what is there to copy (a path, a command) may run past 80 columns, and is never broken.
    long = [line for line in lines if len(line) > 80]
    assert all(line.lstrip().startswith(("hierconsole ", "stored in ")) for line in long), long
    assert "…" not in out
    with Store(home) as store:
        study_id = store.one("SELECT study_id FROM studies")[0]
    # The arms explained, and each loss labelled by its arm, the two losses apart.
    assert "arms: E = Euclidean, H = Poincaré (hyperbolic) geometry; R = regression" in " ".join(out.split())
    progress = next(line for line in lines if line.startswith("final-s42 "))
    assert "loss R: E_R " in progress and " H_R " in progress
    assert "E_R=" not in out
    # Where the results went, and what to run next on them.
    assert f"stored in {home / 'hierconsole.duckdb'}" in " ".join(out.split())
    for command in ("", f" effects {study_id}", f" audit {study_id}", f" export effects --study {study_id}"):
        assert f"hierconsole --home {home}{command}" in out, command
