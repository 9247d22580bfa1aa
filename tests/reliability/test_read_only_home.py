"""Read commands never write; a home nobody may write (an archive) can still be listed, exported and audited."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from hierconsole.cli import main
from hierconsole.study.db.storage import Store
from tests.reliability.conftest import cli_argv, one_line_error, tree_digest
from tests.stores.fixed import COMPLETE

pytestmark = pytest.mark.slow  # the CLI in subprocesses

READS = [
    ["studies"],
    ["runs"],
    ["runs", COMPLETE],
    ["datasets"],
    ["taxonomy", "tiny"],
    ["effects", COMPLETE],
    ["effects", COMPLETE, "--json"],
    ["audit", COMPLETE],
    ["export", "effects", "--study", COMPLETE, "-o", "-", "--format", "csv"],
    ["export", "runs", "-o", "-", "--format", "json"],
]


def _stat_all(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*")}


def test_read_commands_change_no_byte_and_no_mtime(fixed_copy, capsys):
    before, stamps = tree_digest(fixed_copy), _stat_all(fixed_copy)
    for argv in READS:
        assert main(["--home", str(fixed_copy), *argv]) in (0, 1), argv  # audit exits 1: one check fails
    capsys.readouterr()
    assert tree_digest(fixed_copy) == before
    assert _stat_all(fixed_copy) == stamps


def _as_reader(argv: list[str]) -> list[str]:
    """`argv` run so that the file modes bind it: root may write any file whatever its mode, so as root
    the command runs without the capabilities that allow that (CAP_DAC_OVERRIDE and friends)."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # pragma: no cover - util-linux is on every Linux this runs on
        pytest.skip("running as root without setpriv: file modes cannot make a home read-only")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner,-linux_immutable", *argv]


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_as_reader(cli_argv(home, *args)), capture_output=True, text=True, timeout=120)


@pytest.fixture
def archived_home(fixed_home, tmp_path):
    """A copy of the fixed store whose files and folders nobody may write."""
    home = tmp_path / "archive"
    shutil.copytree(fixed_home, home)
    for p in [home, *home.rglob("*")]:
        p.chmod(stat.S_IMODE(p.stat().st_mode) & ~0o222)
    yield home
    for p in [home, *home.rglob("*")]:
        p.chmod(stat.S_IMODE(p.stat().st_mode) | 0o200)


def test_a_read_only_home_is_listed_exported_and_audited(archived_home):
    before = tree_digest(archived_home)
    for argv in READS:
        done = _run(archived_home, *argv)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (argv, done.stderr)
        assert "error:" not in done.stderr, (argv, done.stderr)
    export = _run(archived_home, "export", "effects", "--study", COMPLETE, "-o", "-", "--format", "csv")
    assert export.returncode == 0 and len(export.stdout.splitlines()) > 3 and "," in export.stdout
    # Writing is refused in one line that says what to do instead.
    text = one_line_error(_run(archived_home, "resume"))
    assert "read-only" in text and "copy the home" in text
    assert tree_digest(archived_home) == before


def test_a_read_command_on_a_missing_home_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "typo"
    assert main(["--home", str(missing), "runs"]) == 2  # named, not read as an empty store
    assert "no hierconsole home at" in capsys.readouterr().err
    assert not missing.exists()
    missing.mkdir()  # an empty home reads as an empty store, still creating nothing
    assert main(["--home", str(missing), "runs"]) == 0
    assert "not created yet" in capsys.readouterr().err
    assert list(missing.iterdir()) == []


def _width_in_a_thread(store: Store) -> int:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(store.frame("SELECT * FROM arm_summary").width))
    thread.start()
    thread.join()
    return seen[0]


def test_every_reading_thread_sees_this_versions_views(fixed_home, tmp_path):
    """TEMP views belong to one cursor; a read-only store gives each thread its own, file or memory."""
    (tmp_path / "empty").mkdir()
    for home in (fixed_home, tmp_path / "empty"):
        with Store(home, read_only=True) as store:
            width = _width_in_a_thread(store)
            assert width > 0 and store.frame("SELECT * FROM arm_summary").width == width


@pytest.mark.parametrize("argv", [["studies"], ["runs"], ["effects", COMPLETE], ["families"], ["datasets"]])
def test_a_mistyped_home_is_one_line_and_creates_nothing(tmp_path, argv):
    """As a user met it: `--home` naming no folder printed an empty table and exited 0."""
    missing = tmp_path / "no-such-home"
    done = subprocess.run(cli_argv(missing, *argv), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line_error(done)
    assert f"no hierconsole home at {missing}" in line and "--home" in line
    assert not missing.exists()


@pytest.mark.parametrize("argv", [["resume"], ["resume", "nosuch"]])
def test_resume_on_a_mistyped_home_is_one_line_and_creates_nothing(tmp_path, argv):
    """As a reviewer met it: `resume` made the home and its store before saying there was nothing to do."""
    missing = tmp_path / "no-such-home"
    line = one_line_error(subprocess.run(cli_argv(missing, *argv), capture_output=True, text=True, timeout=120))
    assert f"no hierconsole home at {missing}" in line and not missing.exists()


def test_resume_in_a_home_with_no_store_creates_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    unknown = subprocess.run(cli_argv(home, "resume", "nosuch"), capture_output=True, text=True, timeout=120)
    assert "no study 'nosuch'" in one_line_error(unknown)
    nothing = subprocess.run(cli_argv(home, "resume"), capture_output=True, text=True, timeout=120)
    assert (nothing.returncode, nothing.stdout.strip()) == (0, "nothing to resume"), nothing.stderr
    assert list(home.iterdir()) == []
