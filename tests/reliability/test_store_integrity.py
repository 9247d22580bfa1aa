"""Damage past the store's first block (a truncated file, a garbled block in the middle, a deleted file):
every read path says so in one line naming the file and the way back (doctor, the last backup), exit 2,
and never shows what it could read as if it were all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from hierconsole.study.db.storage import HEADER_BYTES
from tests.reliability.conftest import cli, console_error, one_line_error
from tests.stores.fixed import COMPLETE

pytestmark = pytest.mark.slow  # the CLI in subprocesses


def _blocks_of(path: Path, table: str) -> tuple[int, list[int]]:
    """The block size and the blocks holding `table`'s columns."""
    with duckdb.connect(str(path), read_only=True) as con:
        size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        ids = con.execute(
            "SELECT DISTINCT block_id FROM pragma_storage_info(?) WHERE block_id >= 0 ORDER BY 1", [table]
        ).fetchall()
    return size, [i for (i,) in ids]


def truncate(path: Path, table: str) -> str:  # noqa: ARG001 - every damage takes the table it aims at
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return ""


def garble(path: Path, table: str) -> str:
    """Overwrite the middle one of the blocks holding `table` (not the header, not the catalog)."""
    size, blocks = _blocks_of(path, table)
    assert blocks, f"{table} holds no blocks"
    block = blocks[len(blocks) // 2]
    data = bytearray(path.read_bytes())
    start = HEADER_BYTES + block * size
    data[start + 8 : start + size] = os.urandom(size - 8)  # keep the stored checksum, garble the rest
    path.write_bytes(bytes(data))
    return "Corrupt database file"


def delete(path: Path, table: str) -> str:  # noqa: ARG001
    path.unlink()
    return "is missing"


DAMAGES = {"truncated": truncate, "garbled": garble, "deleted": delete}

# Each read command, with the table whose block the garbling aims at (the one the command must read).
COMMANDS = {
    "studies": (["studies"], "studies"),
    "runs": (["runs", COMPLETE], "jobs"),
    "effects": (["effects", COMPLETE], "metrics"),
    "export": (["export", "metrics", "--study", COMPLETE, "-o", "{out}"], "metrics"),
    "audit": (["audit", COMPLETE], "audits"),
    "resume": (["resume"], "jobs"),
}


def _expect(text: str, path: Path, damage: str, said: str) -> None:
    assert str(path) in text
    assert said in text if said else ("truncated" in text or "Could not read" in text), text
    assert "doctor --repair" in text and "backup" in text, text
    assert "nothing was" in text


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_damaged_store_is_one_line_for_every_read(fixed_copy, tmp_path, damage, command):
    path = fixed_copy / "hierconsole.duckdb"
    argv, table = COMMANDS[command]
    out = tmp_path / "out.csv"
    said = DAMAGES[damage](path, table)
    before = path.read_bytes() if path.exists() else None
    text = one_line_error(cli(fixed_copy, *[a.format(out=out) for a in argv]))
    _expect(text, path, damage, said)
    assert (path.read_bytes() if path.exists() else None) == before
    assert not out.exists()


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_console_names_the_damage_as_it_closes(fixed_copy, damage):
    path = fixed_copy / "hierconsole.duckdb"
    said = DAMAGES[damage](path, "metrics")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from hierconsole.tui import run_app; sys.exit(run_app(sys.argv[1]))",
         str(fixed_copy)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "TERM": "dumb"},
    )  # fmt: skip
    text = console_error(done)
    _expect(text, path, damage, said)
