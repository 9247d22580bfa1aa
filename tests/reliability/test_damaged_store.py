"""A damaged store gives one line (what, which file, what to do), exit 2, no traceback, and is left as it is."""

from __future__ import annotations

import os

import duckdb
import pytest

from tests.reliability.conftest import cli, one_line_error

pytestmark = pytest.mark.slow  # the CLI in subprocesses


def _truncated(path):
    path.write_bytes(path.read_bytes()[:5000])


def _garbled(path):
    data = bytearray(path.read_bytes())
    data[:4096] = os.urandom(4096)  # the header and the first block
    path.write_bytes(bytes(data))


def _empty(path):
    path.write_bytes(b"")


def _newer(path):
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")


def _foreign(path):
    path.unlink()
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE accounts (id INTEGER)")


DAMAGE = {
    "truncated": (_truncated, "Could not read enough bytes"),
    "garbled": (_garbled, "not a valid DuckDB database file"),
    "empty": (_empty, "not a valid DuckDB database file"),
    "newer-version": (_newer, "schema version 99, newer than this hierconsole understands"),
    "foreign": (_foreign, "not a hierconsole store"),
}


@pytest.mark.parametrize("damage", DAMAGE)
# A read command (opens read-only) and a writing one (opens for writing, would migrate).
@pytest.mark.parametrize("command", [["runs"], ["import", "synthetic", "demo"]], ids=["read", "write"])
def test_a_damaged_store_is_one_line_and_untouched(fixed_copy, damage, command):
    path = fixed_copy / "hierconsole.duckdb"
    DAMAGE[damage][0](path)
    before = path.read_bytes()
    text = one_line_error(cli(fixed_copy, *command))
    assert str(path) in text and DAMAGE[damage][1] in text
    assert "backup" in text or "upgrade hierconsole" in text or "another --home" in text
    assert path.read_bytes() == before
    assert not (fixed_copy / "datasets" / "demo").exists()
