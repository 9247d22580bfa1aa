"""A store written by schema version 1 opens under version 2: the family and shuffle tables are added,
nothing it held is touched."""

from __future__ import annotations

import shutil

import duckdb

from hierconsole.locations import db_path
from hierconsole.study.storage import SCHEMA_VERSION, Store

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
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    studies = con.execute("SELECT study_id, phase FROM studies ORDER BY study_id").fetchall()
    con.close()

    with Store(home) as store:
        assert store.value("SELECT value FROM meta WHERE key = 'schema_version'") == str(SCHEMA_VERSION) == "2"
        assert store.rows("SELECT study_id, phase FROM studies ORDER BY study_id") == studies
        assert store.value("SELECT count(*) FROM families") == 0
    con = duckdb.connect(str(db_path(home)))
    assert set(VERSION_2_TABLES) <= _tables(con)
    con.close()
