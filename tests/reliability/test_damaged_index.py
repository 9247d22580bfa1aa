"""A damaged primary-key index, the rest of the store sound: every table scan reads nothing of an index,
but a command's lookup by id (`WHERE study_id = ?`) does. `doctor` said all ok (exit 0) while `export` and
`effects` refused the store; its check must read what the commands read."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from hierconsole.locations import db_path
from hierconsole.study.db.storage import HEADER_BYTES
from tests.reliability.conftest import cli, one_line_error

pytestmark = pytest.mark.slow  # the CLI in subprocesses

BLOCK = 262144  # DuckDB's block size, as the store is written
GARBAGE = bytes(range(64))


def _damaged(source: Path, target: Path, block: int) -> Path:
    shutil.copytree(source, target)
    with open(db_path(target), "r+b") as fh:
        fh.seek(HEADER_BYTES + block * BLOCK + 64)  # past the block's checksum: its body no longer matches it
        fh.write(GARBAGE)
    return target


def _tables_scan(path: Path) -> bool:
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
                con.execute(f'SELECT count(*) + 0 * coalesce(sum(hash(t)), 0) FROM "{table}" AS t').fetchall()
    except duckdb.Error:
        return False
    return True


def _lookup_fails(path: Path, study: str) -> bool:
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            con.execute("SELECT * FROM studies WHERE study_id = ?", [study]).fetchall()
    except duckdb.Error:
        return True
    return False


def test_doctor_reads_the_index_a_lookup_by_id_reads(fixed_copy: Path, tmp_path: Path):
    with duckdb.connect(str(db_path(fixed_copy)), read_only=True) as con:
        study = con.execute("SELECT min(study_id) FROM studies").fetchone()[0]
    blocks = (db_path(fixed_copy).stat().st_size - HEADER_BYTES) // BLOCK
    # The block that holds the index of `studies`: damaged, every table still scans whole, but the lookup fails.
    index_block = next(
        (
            b
            for b in range(blocks)
            if _tables_scan(db_path(home := _damaged(fixed_copy, tmp_path / f"probe-{b}", b)))
            and _lookup_fails(db_path(home), study)
        ),
        None,
    )
    assert index_block is not None, "no block of the store holds only the index of studies"
    home = tmp_path / f"probe-{index_block}"

    refused = one_line_error(cli(home, "export", "effects", "--study", study, "-o", str(tmp_path / "e.csv")))
    assert "is damaged" in refused
    doctor = cli(home, "--wide", "doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    (line,) = [" ".join(line.split()) for line in doctor.stdout.splitlines() if "every table readable" in line]
    assert "problem" in line and "an index of the primary keys" in line, line
