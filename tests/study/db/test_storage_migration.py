"""A store written by schema version 1, 2 or 3 opens under the current version: the family and shuffle tables (2),
the jobs' executor and node columns (3) and the replication_stages table (4) are added, nothing it held
is touched."""

from __future__ import annotations

import shutil

import duckdb

from hierconsole.locations import db_path
from hierconsole.study.db.storage import SCHEMA_VERSION, Store

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
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == str(SCHEMA_VERSION) == "7"
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
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "7"
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
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "7"
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
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "7"
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
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == "7"
        assert store.value("SELECT count(*) FROM calibrations") == 0
        assert store.value("SELECT count(*) FROM replication_work") == 0
