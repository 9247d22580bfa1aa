"""A store written by schema version 1, 2 or 3 opens under the current version: the family and shuffle tables (2),
the jobs' executor and node columns (3) and the replication_stages table (4) are added, nothing it held
is touched."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest

from hierconsole.errors import StoreNeedsUpgradeError
from hierconsole.levels import PAPER_LEVELS, LevelPlan
from hierconsole.locations import db_path
from hierconsole.present.export import write_table
from hierconsole.study.db.catalog import list_datasets, study_levels
from hierconsole.study.db.storage import SCHEMA_VERSION, VIEWS_KEY, Store
from hierconsole.study.read.datasets import taxonomy_lines
from hierconsole.study.read.results import table_frame
from tests.stores.fixed import COMPLETE, LIVE, _study, add_tuning

VERSION_2_TABLES = ("taxonomy_shuffles", "families", "family_members")


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def test_a_version_1_store_is_migrated_in_place(fixed_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    # Turn the copy back into what a version-1 hierconsole left: no version-2 tables, version 1 recorded.
    con = duckdb.connect(str(db_path(home)))
    for table in VERSION_2_TABLES:
        con.execute(f"DROP TABLE {table}")
    con.execute("ALTER TABLE jobs DROP COLUMN executor")
    con.execute("ALTER TABLE jobs DROP COLUMN node")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    studies = con.execute("SELECT study_id, phase FROM studies ORDER BY study_id").fetchall()
    con.close()

    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == str(SCHEMA_VERSION) == "8"
        assert store.rows("SELECT study_id, phase FROM studies ORDER BY study_id") == studies
        assert store.value("SELECT count(*) FROM families") == 0
        assert store.value("SELECT count(*) FROM jobs WHERE executor IS NOT NULL OR node IS NOT NULL") == 0
    con = duckdb.connect(str(db_path(home)))
    assert set(VERSION_2_TABLES) <= _tables(con)
    con.close()


def test_a_version_2_store_gains_the_executor_columns(fixed_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    con = duckdb.connect(str(db_path(home)))
    con.execute("ALTER TABLE jobs DROP COLUMN executor")
    con.execute("ALTER TABLE jobs DROP COLUMN node")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    jobs = con.execute("SELECT job_id, state, attempts FROM jobs ORDER BY job_id").fetchall()
    con.close()

    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "8"
        assert store.rows("SELECT job_id, state, attempts FROM jobs ORDER BY job_id") == jobs
        assert store.rows("SELECT DISTINCT executor, node FROM jobs") == [(None, None)]


def test_a_version_3_store_gains_the_replication_table(fixed_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    con = duckdb.connect(str(db_path(home)))
    con.execute("DROP TABLE replication_stages")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    studies = con.execute("SELECT study_id, phase FROM studies ORDER BY study_id").fetchall()
    con.close()

    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "8"
        assert store.rows("SELECT study_id, phase FROM studies ORDER BY study_id") == studies
        assert store.value("SELECT count(*) FROM replication_stages") == 0


def test_a_version_4_store_gains_the_arm_durations_table(fixed_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    con = duckdb.connect(str(db_path(home)))
    con.execute("DROP TABLE arm_durations")
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    studies = con.execute("SELECT study_id, phase FROM studies ORDER BY study_id").fetchall()
    con.close()

    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "8"
        assert store.rows("SELECT study_id, phase FROM studies ORDER BY study_id") == studies
        assert store.value("SELECT count(*) FROM arm_durations") == 0


def test_a_version_5_store_gains_the_calibration_tables(fixed_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    con = duckdb.connect(str(db_path(home)))
    con.execute("DROP TABLE calibrations")
    con.execute("DROP TABLE replication_work")
    con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    con.close()

    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "8"
        assert store.value("SELECT count(*) FROM calibrations") == 0
        assert store.value("SELECT count(*) FROM replication_work") == 0


# -- version 6 -> 7: levels of any depth ------------------------------------------------------------------

STORES = Path(__file__).parents[2] / "stores"
SCHEMA_V6 = STORES / "schema_v6.sql"
"""store/schema.sql as version 6 had it (commit ef279f0), and its rendered views: a version-6 store is built
from them, as a version-6 hierconsole left it."""
VIEWS_V6 = STORES / "views_v6_rendered.sql"
EXPORTED = ("metrics", "runs", "audits", "tuning", "arms", "effects", "recall", "deviation", "redistribution")
SHUFFLE_STUDY = "demo-shuffled"


def _with_tuning_and_shuffle(home: Path) -> None:
    """Tuning candidates (one with no valid query at the high level) and a shuffle control's study."""
    with Store(home) as store, pytest.MonkeyPatch.context() as mp:
        for tau, maps, score, status in (
            (0.1, {"middle": 0.31, "high": 0.35}, 0.33, "winner"),
            (0.5, {"middle": 0.3, "high": None}, 0.3, "runner-up"),
        ):
            add_tuning(store, COMPLETE, "euclidean", tau, maps, score, status)
        _study(store, SHUFFLE_STUDY, mp, {"controls.taxonomy_shuffle": True})


def _downgrade_to_v6(source: Path, home: Path) -> None:
    """`home`: a copy of `source` whose store is rebuilt under the version-6 schema with the same rows."""
    shutil.copytree(source, home)
    db_path(home).unlink()
    con = duckdb.connect(str(db_path(home)))
    con.execute(SCHEMA_V6.read_text())
    views = VIEWS_V6.read_text()
    con.execute(views)
    v6_tables = {r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
    ).fetchall()} - {"meta"}  # fmt: skip
    con.execute(f"ATTACH '{db_path(source)}' AS src (READ_ONLY)")
    levels = "(SELECT list(n_groups ORDER BY position) FROM src.dataset_levels l WHERE l.dataset_id = d.dataset_id)"
    special = {
        "datasets": f"SELECT d.* EXCLUDE (n_leaf), {levels}[1] AS n_leaf, {levels}[2] AS n_middle, "
        f"{levels}[3] AS n_high FROM src.datasets d",
        "taxonomy_nodes": "SELECT dataset_id, leaf_index, path[1] AS leaf, path[2] AS middle, path[3] AS high "
        "FROM src.taxonomy_nodes",
        "tuning": "SELECT t.*, m.mAP AS middle_mAP, h.mAP AS high_mAP FROM src.tuning t "
        "JOIN src.tuning_levels m ON m.level = 'middle' AND (m.study_id, m.geometry, m.tau) = (t.study_id, t.geometry, t.tau) "
        "JOIN src.tuning_levels h ON h.level = 'high' AND (h.study_id, h.geometry, h.tau) = (t.study_id, t.geometry, t.tau)",
        "taxonomy_shuffles": "SELECT s.*, a.parents AS leaf_middle, b.parents AS middle_high, a.dev_nodes AS dev_leaves, "
        "b.dev_nodes AS dev_middles, a.fixed AS leaf_fixed, a.fixed_min AS leaf_min, b.fixed AS middle_fixed, "
        "b.fixed_min AS middle_min FROM src.taxonomy_shuffles s "
        "JOIN src.taxonomy_shuffle_edges a ON a.study_id = s.study_id AND a.position = 1 "
        "JOIN src.taxonomy_shuffle_edges b ON b.study_id = s.study_id AND b.position = 2",
        "runs": "SELECT * EXCLUDE (objective_params) FROM src.runs",  # a column of version 8
    }
    for table in sorted(v6_tables):
        con.execute(f"INSERT INTO {table} BY NAME {special.get(table, f'SELECT * FROM src.{table}')}")
    con.execute("INSERT INTO meta SELECT * FROM src.meta")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.execute("UPDATE meta SET value = ? WHERE key = ?", [hashlib.sha256(views.encode()).hexdigest(), VIEWS_KEY])
    con.execute("DETACH src")
    con.close()


def _exports(home: Path, out: Path) -> dict[str, bytes]:
    """Every study's tables as `export` writes them (CSV), and the dataset listing's counts."""
    out.mkdir()
    files = {}
    with Store(home, read_only=True) as store:
        for study_id in (COMPLETE, LIVE, SHUFFLE_STUDY):
            for table in EXPORTED:
                if table not in ("metrics", "runs", "audits", "tuning") and study_id != COMPLETE:
                    continue  # analysis tables need a scored study
                path = out / f"{study_id}-{table}.csv"
                write_table(table_frame(store, table, study_id), path, "csv")
                files[path.name] = path.read_bytes()
        files["datasets"] = repr([(d.dataset_id, d.n_leaf, d.level_counts, d.levels) for d in list_datasets(store)]).encode()
        files["taxonomy"] = "\n".join(taxonomy_lines(store, "tiny")).encode()
        files["shuffle"] = repr(
            store.rows("SELECT * FROM taxonomy_shuffles s JOIN taxonomy_shuffle_edges USING (study_id) ORDER BY position")
        ).encode()
    return files


def test_a_version_6_store_migrates_to_7_and_exports_the_same_bytes(fixed_home, tiny_fs, tmp_path):
    source = tmp_path / "source"
    shutil.copytree(fixed_home, source)
    _with_tuning_and_shuffle(source)
    before = _exports(source, tmp_path / "before")
    home = tmp_path / "home"
    _downgrade_to_v6(source, home)
    con = duckdb.connect(str(db_path(home)), read_only=True)
    assert {"n_middle", "n_high"} <= {r[0] for r in con.execute("DESCRIBE datasets").fetchall()}
    assert not {"dataset_levels", "study_levels", "tuning_levels", "taxonomy_shuffle_edges"} & _tables(con)
    v6_rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone() for t in ("tuning", "taxonomy_shuffles", "metrics")}
    con.close()
    assert v6_rows["tuning"] == (2,) and v6_rows["taxonomy_shuffles"] == (1,)
    with pytest.raises(StoreNeedsUpgradeError, match="schema version 6 and needs an upgrade to 8"):
        Store(home, read_only=True)

    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "8"
        tax = tiny_fs.taxonomy
        assert store.rows("SELECT position, code, name, n_groups FROM dataset_levels ORDER BY position") == [
            (i, code, name, n)
            for i, (code, name, n) in enumerate(zip(PAPER_LEVELS.codes, tax.level_names, tax.counts, strict=True), start=1)
        ]
        assert store.rows(
            "SELECT study_id, list(code ORDER BY position), list(trained ORDER BY position), "
            "list(in_hier ORDER BY position) FROM study_levels GROUP BY study_id ORDER BY study_id"
        ) == [(s, ["leaf", "middle", "high"], [True] * 3, [False, True, True]) for s in sorted((COMPLETE, LIVE, SHUFFLE_STUDY))]
        for study_id in (COMPLETE, LIVE, SHUFFLE_STUDY):
            assert study_levels(store, study_id) == LevelPlan.default(PAPER_LEVELS)
        assert store.value("SELECT count(*) FROM taxonomy_shuffle_edges") == 2
        assert store.value("SELECT count(*) FROM tuning_levels WHERE mAP IS NULL") == 1
    con = duckdb.connect(str(db_path(home)), read_only=True)
    for table, source_table in (("datasets", "datasets"), ("tuning", "tuning"), ("taxonomy_shuffles", "taxonomy_shuffles"),
                                ("taxonomy_nodes", "taxonomy_nodes")):
        assert con.execute(f"DESCRIBE {table}").fetchall() == duckdb.connect(str(db_path(source)), read_only=True).execute(
            f"DESCRIBE {source_table}"
        ).fetchall(), f"{table}: a migrated store has a new store's columns"
    con.close()
    after = _exports(home, tmp_path / "after")
    assert after.keys() == before.keys()
    for name, data in before.items():
        assert after[name] == data, name


def test_a_version_7_store_gains_the_runs_objective_params(fixed_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    _with_tuning_and_shuffle(home)
    before = _exports(home, tmp_path / "before")
    con = duckdb.connect(str(db_path(home)))
    runs = con.execute("SELECT * EXCLUDE (objective_params) FROM runs ORDER BY run_id").fetchall()
    con.execute("ALTER TABLE runs DROP COLUMN objective_params")
    con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreNeedsUpgradeError, match="schema version 7 and needs an upgrade to 8"):
        Store(home, read_only=True)
    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "8"
        # Every run recorded before counts 0: none of the factorial's objectives had parameters of their own.
        assert store.rows("SELECT * EXCLUDE (objective_params) FROM runs ORDER BY run_id") == runs
        assert store.rows("SELECT DISTINCT objective_params FROM runs") == [(0,)]
    after = _exports(home, tmp_path / "after")
    assert after == before
