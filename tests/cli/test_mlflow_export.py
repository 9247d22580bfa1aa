"""`hierconsole export mlflow STUDY --tracking-uri URI`, run as a real subprocess into a real SQLite MLflow
store, read back with MLflow's own client and compared with what the CLI's own `export` and `effects --json`
print for the same study."""

from __future__ import annotations

import io
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from hierconsole.study.db.ids import baseline_run_id, evaluate_job_id
from hierconsole.study.db.storage import Store
from tests.stores.fixed import ARMS, COMPLETE, EPOCHS, SEEDS, _apply, _loss, evaluation_events

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # the CLI in subprocesses
    # MLflow's SQLAlchemy store, opened here by MlflowClient to read back: its warning, not ours to fix.
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated"),
]

RUN_KEY = "hierconsole.run_key"
FROZEN_VALUE = {"leaf": 0.21, "middle": 0.32, "high": 0.43}  # a fabricated frozen baseline's mAP per level
VAL_CELL = "H_S"  # the cell of seed 42 given validation scores


def cli(home: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), *argv],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def _add_baseline_and_validation(home: Path) -> None:
    """A frozen baseline scored on every Q/G perturbation, and validation scores for one cell, through the
    store's real ingest (the fixed store has neither)."""
    run_id = baseline_run_id(COMPLETE, "frozen")
    metrics = [
        {
            "kind": "metrics",
            "key": f"metrics:{run_id}:{pert}:micro",
            "run_id": run_id,
            "seed": -1,
            "arm": "frozen",
            "perturbation": pert,
            "aggregation": "micro",
            "posthoc": False,
            "metrics": {
                level: {
                    "mAP": FROZEN_VALUE[level] + 0.001 * (pert % 5),
                    **{f"R@{k}": 0.5 for k in (1, 5, 10, 20)},
                    "valid_queries": 40.0,
                }
                for level in FROZEN_VALUE
            },
            "ts": 1_800_000_500.0 + pert % 10,
        }
        for pert in SEEDS
    ]
    validation = [
        {
            "kind": "val",
            "key": f"val:{VAL_CELL}:{epoch}",
            "cell": VAL_CELL,
            "epoch": epoch,
            "aggregation": "micro",
            "metrics": {level: {"mAP": 0.1 * epoch + 0.01 * i} for i, level in enumerate(FROZEN_VALUE)},
            "score": 0.1 * epoch,
            "ts": 1_800_000_042.0 + epoch,
        }
        for epoch in range(1, EPOCHS + 1)
    ]
    # A post-hoc macro re-score of every cell (its values shifted, so it cannot pass for the micro ones).
    macro = [
        {
            **e,
            "key": e["key"].replace(":micro", ":macro"),
            "aggregation": "macro",
            "posthoc": True,
            "metrics": {lv: {m: v + 0.01 for m, v in ms.items()} for lv, ms in e["metrics"].items()},
        }
        for e in evaluation_events(COMPLETE)
        if e["kind"] == "metrics"
    ]
    with Store(home) as store:
        _apply(store, evaluate_job_id(COMPLETE), COMPLETE, "evaluate", 0, metrics)
        _apply(store, f"{COMPLETE}/rescore-macro", COMPLETE, "rescore", 0, macro)
        _apply(store, f"{COMPLETE}/final-s42", COMPLETE, "final", 42, validation)


@pytest.fixture(scope="module")
def exported(fixed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A copy of the fixed store (with a baseline and validation scores), exported once."""
    root = tmp_path_factory.mktemp("mlflow")
    home = root / "home"
    shutil.copytree(fixed_home, home)
    _add_baseline_and_validation(home)
    db = root / "mlflow.db"
    done = cli(home, "export", "mlflow", COMPLETE, "--tracking-uri", f"sqlite:///{db}")
    assert done.returncode == 0, done.stderr
    return home, db, done.stdout


def _runs(db: Path, experiment: str = COMPLETE) -> dict[str, mlflow.entities.Run]:
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    runs = client.search_runs([found.experiment_id], max_results=1000)
    keys = [r.data.tags[RUN_KEY] for r in runs]
    assert len(keys) == len(set(keys)), "a run key logged twice"
    return {r.data.tags[RUN_KEY]: r for r in runs}


def _csv(home: Path, *argv: str) -> pl.DataFrame:
    done = cli(home, *argv, "-o", "-", "--format", "csv")
    assert done.returncode == 0, done.stderr
    return pl.read_csv(io.StringIO(done.stdout))


def _expected_test_numbers(
    home: Path, study: str = COMPLETE, aggregation: str = "micro", prefix: str = "test/"
) -> dict[str, dict[str, float]]:
    """run id -> `test/<level>_mAP` and `test/hier_mAP`, from `export metrics` (one row per perturbation):
    each the mean over the seed's Q/G perturbations, hier_mAP the mean of middle and high per perturbation."""
    rows = _csv(home, "export", "metrics", "--study", study).filter(
        (pl.col("metric") == "mAP") & (pl.col("aggregation") == aggregation)
    )
    out: dict[str, dict[str, float]] = {}
    for (run_id,), group in rows.group_by(["run_id"]):
        by_pert: dict[int, dict[str, float]] = {}
        for r in group.iter_rows(named=True):
            by_pert.setdefault(r["perturbation"], {})[r["level"]] = r["value"]
        perts = sorted(by_pert)
        numbers = {
            f"{prefix}{lv}_mAP": statistics.fmean(by_pert[p][lv] for p in perts) for lv in FROZEN_VALUE
        }
        numbers[f"{prefix}hier_mAP"] = statistics.fmean(
            (by_pert[p]["middle"] + by_pert[p]["high"]) / 2 for p in perts
        )
        out[str(run_id)] = numbers
    return out


def test_every_final_cell_and_the_baseline_is_one_run(exported):
    home, db, out = exported
    runs = _runs(db)
    cells = _csv(home, "export", "runs", "--study", COMPLETE).filter(pl.col("kind") == "final")
    expected = {*cells["run_id"].to_list(), baseline_run_id(COMPLETE, "frozen")}
    assert set(runs) == expected and len(runs) == len(SEEDS) * len(ARMS) + 1
    assert "13 runs" in out and "13 created, 0 updated" in out
    for r in cells.iter_rows(named=True):
        run = runs[r["run_id"]]
        params = run.data.params
        assert (params["arm"], params["geometry"], params["loss"], params["seed"]) == (
            r["arm"], r["geometry"], r["loss"], str(r["seed"])
        )  # fmt: skip
        assert run.info.run_name == f"s{r['seed']} {r['arm']}" and run.info.status == "FINISHED"
        assert run.data.tags["hierconsole.kind"] == "cell"


def test_params_are_the_frozen_preset_flattened(exported):
    home, db, _ = exported
    with Store(home, read_only=True) as store:
        preset = json.loads(store.value("SELECT preset FROM studies WHERE study_id = ?", [COMPLETE]))
    run = _runs(db)[f"{COMPLETE}/final-s42/H_S"]
    params = run.data.params
    assert params["training.lr"] == "0.001" and params["training.hidden"] == "32"
    assert params["geometry.poincare.c"] == json.dumps(preset["geometry"]["poincare"]["c"])
    assert params["evaluation.qg_seeds"] == json.dumps(list(SEEDS))
    assert params["evaluation.aggregation"] == "micro" and params["study.name"] == preset["study"]["name"]
    assert params["tau"] == "0.2"
    leaves = sum(len(v) for v in preset.values())  # the preset's options, one section deep at most below
    assert len([k for k in params if "." in k]) >= leaves - len(preset)


def test_test_metrics_equal_the_cli_exports(exported):
    home, db, _ = exported
    runs = _runs(db)
    expected = _expected_test_numbers(home)
    assert set(expected) == set(runs)
    for run_id, numbers in expected.items():
        logged = runs[run_id].data.metrics
        for key, value in numbers.items():
            assert logged[key] == pytest.approx(value, rel=1e-12, abs=1e-15), (run_id, key)
    macro = _expected_test_numbers(home, aggregation="macro", prefix="test/macro/")
    assert len(macro) == len(SEEDS) * len(ARMS)
    for run_id, numbers in macro.items():
        for key, value in numbers.items():
            assert runs[run_id].data.metrics[key] == pytest.approx(value, rel=1e-12, abs=1e-15), (run_id, key)
            assert value != pytest.approx(runs[run_id].data.metrics[key.replace("/macro", "")])
    frozen = runs[baseline_run_id(COMPLETE, "frozen")].data.metrics
    assert frozen["test/leaf_mAP"] == pytest.approx(
        FROZEN_VALUE["leaf"] + 0.001 * statistics.fmean(p % 5 for p in SEEDS)
    )
    assert frozen["test/leaf_R_at_1"] == 0.5


def test_the_effects_json_arm_means_are_the_runs_means(exported):
    home, db, _ = exported
    done = cli(home, "effects", COMPLETE, "--json")
    assert done.returncode == 0, done.stderr
    means = {(a["arm"], a["metric"]): a["mean"] for a in json.loads(done.stdout)["arms"]}
    runs = _runs(db)
    for arm in (*ARMS, "frozen"):
        for metric in ("leaf_mAP", "hier_mAP", "high_R@1"):
            if (arm, metric) not in means:
                continue
            keys = [k for k in runs if k.endswith(f"/{arm}")]
            values = [runs[k].data.metrics["test/" + metric.replace("@", "_at_")] for k in keys]
            assert statistics.fmean(values) == pytest.approx(means[(arm, metric)], rel=1e-12), (arm, metric)
    assert ("H_S", "hier_mAP") in means and ("frozen", "leaf_mAP") in means


def test_training_and_validation_per_epoch_are_steps(exported):
    _, db, _ = exported
    runs = _runs(db)
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    for seed in SEEDS:
        for arm in ARMS:
            run = runs[f"{COMPLETE}/final-s{seed}/{arm}"]
            history = client.get_metric_history(run.info.run_id, "train/loss")
            assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
                (epoch, _loss(arm, epoch, seed)) for epoch in range(1, EPOCHS + 1)
            ]
            assert run.data.metrics["train/updates"] == 8 * EPOCHS
    val = client.get_metric_history(runs[f"{COMPLETE}/final-s42/{VAL_CELL}"].info.run_id, "val/high_mAP")
    assert sorted((m.step, m.value) for m in val) == [
        (e, pytest.approx(0.1 * e + 0.02)) for e in range(1, EPOCHS + 1)
    ]
    assert "val/high_mAP" not in runs[f"{COMPLETE}/final-s42/E_R"].data.metrics


def test_audits_and_hashes_are_tags(exported):
    home, db, _ = exported
    audits = _csv(home, "export", "audits", "--study", COMPLETE)
    with Store(home, read_only=True) as store:
        lock, preset_sha = store.one(
            "SELECT lock_sha256, preset_sha256 FROM studies WHERE study_id = ?", [COMPLETE]
        )
    assert lock
    for run in _runs(db).values():
        tags = run.data.tags
        assert tags["hierconsole.lock_sha256"] == lock and tags["hierconsole.preset_sha256"] == preset_sha
        for r in audits.iter_rows(named=True):
            assert tags[f"hierconsole.audit.{r['check_name']}"] == ("pass" if r["ok"] else "fail")
            assert tags[f"hierconsole.audit.{r['check_name']}.evidence"] == r["evidence"][:5000]
    assert "fail" in {run.data.tags["hierconsole.audit.update_budget"] for run in _runs(db).values()}


def test_a_second_export_updates_the_same_runs(exported, tmp_path):
    home0, db0, _ = exported
    home, db = tmp_path / "home", tmp_path / "mlflow.db"
    shutil.copytree(home0, home)
    shutil.copy(db0, db)
    target = f"{COMPLETE}/final-s2024/E_S"
    before = _runs(db)
    with Store(home) as store:  # a re-scored value: the next export must carry it
        store.execute(
            "UPDATE metrics SET value = value + 0.05 WHERE run_id = ? AND level = 'leaf' AND metric = 'mAP' "
            "AND aggregation = 'micro'",
            [target],
        )
    done = cli(home, "export", "mlflow", COMPLETE, "--tracking-uri", f"sqlite:///{db}")
    assert done.returncode == 0, done.stderr
    assert "0 created, 13 updated, 1 metric value logged" in done.stdout
    after = _runs(db)
    assert set(after) == set(before)
    assert {k: r.info.run_id for k, r in after.items()} == {k: r.info.run_id for k, r in before.items()}
    expected = _expected_test_numbers(home)[target]["test/leaf_mAP"]
    assert after[target].data.metrics["test/leaf_mAP"] == pytest.approx(expected, rel=1e-12)
    assert after[target].data.metrics["test/leaf_mAP"] == pytest.approx(
        before[target].data.metrics["test/leaf_mAP"] + 0.05
    )
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    for key, run in after.items():
        if key.endswith("/frozen"):
            continue
        assert len(client.get_metric_history(run.info.run_id, "train/loss")) == EPOCHS  # no step logged twice
        assert len(client.get_metric_history(run.info.run_id, "test/high_mAP")) == 1


def test_a_changed_parameter_is_refused_before_anything_is_written(exported, tmp_path):
    home0, db0, _ = exported
    home, db = tmp_path / "home", tmp_path / "mlflow.db"
    shutil.copytree(home0, home)
    shutil.copy(db0, db)
    with Store(home) as store:  # a store that no longer says what was logged (MLflow keeps a param for good)
        store.execute(
            """UPDATE studies SET preset = replace(preset, '"lr":0.001', '"lr":0.002') WHERE study_id = ?""",
            [COMPLETE],
        )
    before = db.read_bytes()
    done = cli(home, "export", "mlflow", COMPLETE, "--tracking-uri", f"sqlite:///{db}")
    assert (
        done.returncode == 2
        and "training.lr" in done.stderr
        and "cannot change a logged parameter" in done.stderr
    )
    assert "Traceback" not in done.stderr and db.read_bytes() == before  # refused before any write
    runs = _runs(db)
    assert len(runs) == len(SEEDS) * len(ARMS) + 1
    assert {r.data.params["training.lr"] for r in runs.values()} == {"0.001"}


def test_a_trained_study_with_every_baseline(tmp_path_factory):
    """A real study (2 seeds, 2 epochs, validation every epoch, the frozen, pca and HIER-style baselines)
    trained by `run`, then exported: every cell and baseline once, numbers as the CLI prints them."""
    from hierconsole.datasets import make_synthetic
    from hierconsole.study.db.catalog import register_dataset
    from tests.tiny import TINY

    root = tmp_path_factory.mktemp("trained")
    home, db = root / "home", root / "mlflow.db"
    with Store(home) as store:
        register_dataset(store, make_synthetic(TINY))
    settings = [
        "training.hidden=32", "training.out_dim=8", "training.batch_size=32", "training.lr=1e-3",
        "evaluation.n_query=40", "compute.device='cpu'", "training.val_every=1",
        'evaluation.baselines=["frozen","pca","hier"]',
    ]  # fmt: skip
    argv = ["run", "demo", "--dataset", "tiny", "--epochs", "2", "--seeds", "42,2024"]
    done = cli(home, *argv, *(a for s in settings for a in ("--set", s)))
    assert done.returncode == 0, done.stderr
    with Store(home, read_only=True) as store:
        study = store.value("SELECT study_id FROM studies")
        losses = store.rows("SELECT run_id, epoch, train_loss FROM epochs ORDER BY run_id, epoch")
    done = cli(home, "export", "mlflow", study, "--tracking-uri", f"sqlite:///{db}")
    assert done.returncode == 0, done.stderr
    runs = _runs(db, study)
    cells = [f"{study}/final-s{seed}/{arm}" for seed in (42, 2024) for arm in (*ARMS, "hier")]
    assert set(runs) == {*cells, baseline_run_id(study, "frozen"), baseline_run_id(study, "pca")}
    assert runs[f"{study}/final-s42/hier"].data.tags["hierconsole.kind"] == "baseline"
    assert runs[f"{study}/final-s42/hier"].data.params["loss"] == "hier"
    expected = _expected_test_numbers(home, study)
    assert set(expected) == set(runs)
    for run_id, numbers in expected.items():
        for key, value in numbers.items():
            assert runs[run_id].data.metrics[key] == pytest.approx(value, rel=1e-12, abs=1e-15), (run_id, key)
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    for run_id in cells:
        history = client.get_metric_history(runs[run_id].info.run_id, "train/loss")
        assert sorted((m.step, m.value) for m in history) == [(e, v) for r, e, v in losses if r == run_id]
        assert [m.step for m in client.get_metric_history(runs[run_id].info.run_id, "val/high_mAP")] == [1, 2]
    effects = cli(home, "effects", study, "--json")
    means = {(a["arm"], a["metric"]): a["mean"] for a in json.loads(effects.stdout)["arms"]}
    for arm in (*ARMS, "hier", "frozen", "pca"):
        values = [r.data.metrics["test/hier_mAP"] for k, r in runs.items() if k.endswith(f"/{arm}")]
        assert statistics.fmean(values) == pytest.approx(means[(arm, "hier_mAP")], rel=1e-12), arm


def test_a_bad_study_is_one_line_and_writes_nothing(fixed_home, tmp_path):
    db = tmp_path / "mlflow.db"
    done = cli(fixed_home, "export", "mlflow", "no-such-study", "--tracking-uri", f"sqlite:///{db}")
    assert done.returncode == 2 and "no study 'no-such-study'" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not db.exists()


def test_a_bad_uri_is_one_line(fixed_home, tmp_path):
    done = cli(fixed_home, "export", "mlflow", COMPLETE, "--tracking-uri", "bogus://nowhere")
    assert done.returncode == 2 and "--tracking-uri bogus://nowhere" in done.stderr
    assert "Traceback" not in done.stderr
    assert len([ln for ln in done.stderr.splitlines() if "error:" in ln]) == 1
    from_env = cli(
        fixed_home, "export", "mlflow", COMPLETE, env={**os.environ, "MLFLOW_TRACKING_URI": "bogus://env"}
    )
    assert from_env.returncode == 2 and "--tracking-uri bogus://env" in from_env.stderr
    missing = cli(
        fixed_home,
        "export",
        "mlflow",
        COMPLETE,
        env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    )
    assert (
        missing.returncode == 2 and "--tracking-uri" in missing.stderr and "Traceback" not in missing.stderr
    )


def test_without_the_extra_it_says_how_to_install(fixed_home, tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoMlflow:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'mlflow':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoMlflow())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    db = tmp_path / "mlflow.db"
    done = cli(fixed_home, "export", "mlflow", COMPLETE, "--tracking-uri", f"sqlite:///{db}", env=env)
    assert done.returncode == 2 and "pip install 'hierconsole[mlflow]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not db.exists()


def test_tables_still_need_an_output_and_refuse_tracker_arguments(fixed_home):
    done = cli(fixed_home, "export", "runs", "--study", COMPLETE)
    assert done.returncode == 2 and "-o PATH" in done.stderr
    done = cli(fixed_home, "export", "runs", COMPLETE, "-o", "-")
    assert done.returncode == 2 and "--study ID" in done.stderr
