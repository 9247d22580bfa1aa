"""Export writes a new file atomically with the umask's mode, replaces only regular files, writes through a
symlink only with --force (to its target), and `-o -` prints text formats to standard output."""

from __future__ import annotations

import os
import socket
import stat

import polars as pl
import pytest

from hierconsole.cli import main
from tests.reliability.conftest import cli, one_line_error
from tests.stores.fixed import COMPLETE


def _export(home, capsys, *args) -> tuple[int, str, str]:
    code = main(["--home", str(home), "export", "effects", "--study", COMPLETE, *args])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


def test_a_new_file_gets_the_umask_mode_and_no_temp_file_stays(fixed_home, tmp_path, capsys):
    old = os.umask(0o027)
    try:
        code, _, _ = _export(fixed_home, capsys, "-o", str(tmp_path / "e.csv"))
    finally:
        os.umask(old)
    assert code == 0
    assert stat.S_IMODE((tmp_path / "e.csv").stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["e.csv"]


def test_force_keeps_the_mode_of_the_file_it_replaces(fixed_home, tmp_path, capsys):
    target = tmp_path / "e.csv"
    target.write_text("old\n")
    target.chmod(0o604)
    assert _export(fixed_home, capsys, "-o", str(target), "--force")[0] == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o604 and target.read_text() != "old\n"


def test_a_symlink_is_written_through_only_with_force(fixed_home, tmp_path, capsys):
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    code, _, err = _export(fixed_home, capsys, "-o", str(link))
    assert code == 2 and "is a symlink" in err and real.read_text() == "old\n"
    code, _, _ = _export(fixed_home, capsys, "-o", str(link), "--force")
    assert code == 0 and link.is_symlink() and os.readlink(link) == str(real)
    assert pl.read_csv(real).height > 0


@pytest.mark.slow  # the CLI in a subprocess
@pytest.mark.parametrize("kind", ["device", "socket", "fifo", "folder"])
def test_non_regular_targets_are_refused_even_with_force(fixed_home, tmp_path, kind):
    if kind == "device":
        target = "/dev/null"
    elif kind == "folder":
        target = str(tmp_path)
    else:
        target = str(tmp_path / kind)
        if kind == "fifo":
            os.mkfifo(target)
        else:
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(target)
    before = os.stat(target)
    text = one_line_error(cli(fixed_home, "export", "effects", "--study", COMPLETE, "-o", target, "--format", "csv", "--force"))
    assert ("not a regular file" in text) or ("is a folder" in text)
    after = os.stat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_dash_writes_text_to_stdout_and_refuses_parquet(fixed_home, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _export(fixed_home, capsys, "-o", "-", "--format", "csv")
    assert code == 0 and "wrote" not in out  # the table, and nothing else, on stdout
    assert pl.read_csv(out.encode()).height > 0
    code, _, err = _export(fixed_home, capsys, "-o", "-", "--format", "parquet")
    assert code == 2 and "text formats only" in err
    code, plain, _ = _export(fixed_home, capsys, "-o", "-")  # the README: `export -o -` prints a text format
    assert code == 0 and plain == out  # csv, full precision, when no --format is given
    assert not (tmp_path / "-").exists()


def test_dot_slash_dash_is_a_file_named_dash(fixed_home, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _export(fixed_home, capsys, "-o", "./-", "--format", "csv")
    assert code == 0 and (tmp_path / "-").is_file() and "wrote table effects" in out
