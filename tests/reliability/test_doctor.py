"""`doctor` checks a home's store and `doctor --repair` rebuilds a damaged one (truncated, garbled in the
middle, deleted) from the newest backup and the job folders: the rebuilt store's exports equal the
originals row for row, and `resume` finishes a half-finished study bit-identical to an uninterrupted run.
A study created after that backup is rebuilt from its record; a damaged newest backup is skipped for an
older one; a repair refuses while a run holds the store and leaves a sound store alone unless forced."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import duckdb
import polars as pl
import pytest

from hierconsole.cli import main
from hierconsole.datasets import FeatureSet
from hierconsole.errors import StoreBusyError
from hierconsole.study.db import backups
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import HEADER_BYTES, SCHEMA_VERSION, Store
from tests.reliability.conftest import (
    TINY_RUN,
    cli,
    cli_argv,
    one_line_error,
    paused_at,
    tree_digest,
    wait_for,
    wait_paused,
)
from tests.stores.real import family_file

pytestmark = pytest.mark.slow  # studies in subprocesses

# The finished study leaves one backup, at its lock; the half-finished one a copy after every write, as a
# long study leaves them every N minutes. The tests keep one of them only, so most of the state comes
# from the event logs.
AT_LOCK = {**os.environ, backups.ENV_MINUTES: "0", backups.ENV_KEEP: "1000"}
OFTEN = {**os.environ, backups.ENV_MINUTES: "0.001", backups.ENV_KEEP: "1000"}
FINISHED = [*TINY_RUN, "--epochs", "2", "--seeds", "42"]
# Stopped (SIGINT) while its worker waits before epoch HALF_PAUSE (the trainer's pause hook), so the stop
# always lands mid-training: a run left to race the signal was seen to finish and lock first on a loaded
# machine, and a study locked after the newest backup is rebuilt with the repair's own lock time (see the
# closing note of that stop), which is not what this tests.
HALF = [*TINY_RUN, "--epochs", "6", "--seeds", "42", "--set", "study.name='half'"]
HALF_PAUSE = 3
TABLES = ("runs", "metrics", "audits")


def _studies(home: Path) -> list[str]:
    with Store(home, read_only=True) as store:
        return [r[0] for r in store.rows("SELECT study_id FROM studies ORDER BY created_at")]


def _exports(home: Path, out: Path) -> dict[tuple[str, str], str]:
    out.mkdir(parents=True, exist_ok=True)
    found = {}
    for study in _studies(home):
        for table in TABLES:
            path = out / f"{study}-{table}.csv"
            done = cli(home, "export", table, "--study", study, "-o", str(path), "--force")
            assert done.returncode == 0, done.stderr
            text = path.read_text()
            if table == "audits":
                # When a check ran: a rebuild that had to re-run the audits (from a copy taken before
                # them) ran them later. Every other value must be equal.
                text = pl.read_csv(path).drop("checked_at").write_csv()
            found[(study, table)] = text
    return found


def _differing_lines(got: dict[tuple[str, str], str], want: dict[tuple[str, str], str]) -> str:
    """The lines that differ, export by export (pytest cuts a long evidence string before its difference)."""
    out = []
    for key in sorted(set(got) | set(want)):
        a, b = got.get(key, "").splitlines(), want.get(key, "").splitlines()
        out += [f"{key}: {x!r} != {y!r}" for x, y in zip(a, b, strict=False) if x != y]
        if len(a) != len(b):
            out.append(f"{key}: {len(a)} lines against {len(b)}")
    return "\n".join(out)


def _final_models(home: Path, study: str) -> list[tuple]:
    with Store(home, read_only=True) as store:
        return store.rows(
            "SELECT seed, arm, final_sha256 FROM runs WHERE kind = 'final' AND study_id = ? ORDER BY ALL", [study]
        )


def _new_home(path: Path, tiny_fs: FeatureSet) -> Path:
    with Store(path) as store:
        register_dataset(store, tiny_fs)
    return path


@pytest.fixture(scope="module")
def studied(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> Path:
    """A home with a finished study and a half-finished one (interrupted mid-training), and backups."""
    home = _new_home(tmp_path_factory.mktemp("doctor") / "home", tiny_fs)
    done = cli(home, *FINISHED, env=AT_LOCK, timeout=600)
    assert done.returncode == 0, done.stderr
    env = {**OFTEN, **paused_at(HALF_PAUSE)}
    run = subprocess.Popen(cli_argv(home, *HALF), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        folder = wait_paused(home, epoch=HALF_PAUSE)
        assert any((folder / "checkpoints").glob("ckpt-*.pt"))
        run.send_signal(signal.SIGINT)  # stopped early: its jobs cancelled, resumable
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert len(_studies(home)) == 2
    with Store(home, read_only=True) as store:  # the premise: stopped before its lock
        assert store.value("SELECT count(*) FROM studies WHERE name = 'half' AND locked_at IS NULL") == 1
    return home


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> list[tuple]:
    home = _new_home(tmp_path_factory.mktemp("reference") / "home", tiny_fs)
    done = cli(home, *HALF, timeout=600)
    assert done.returncode == 0, done.stderr
    return _final_models(home, _studies(home)[0])


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garble(path: Path) -> None:
    """Garble the middle one of the blocks the tables use (a free block would harm nothing)."""
    with duckdb.connect(str(path), read_only=True) as con:
        size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        used = sorted(
            {b for t in tables for (b,) in con.execute(
                "SELECT DISTINCT block_id FROM pragma_storage_info(?) WHERE block_id >= 0", [t]
            ).fetchall()}
        )  # fmt: skip
    start = HEADER_BYTES + used[len(used) // 2] * size
    data = bytearray(path.read_bytes())
    data[start + 8 : start + size] = os.urandom(size - 8)
    path.write_bytes(bytes(data))


def _delete(path: Path) -> None:
    path.unlink()


DAMAGES = {"truncated": _truncate, "garbled": _garble, "deleted": _delete}


def test_doctor_reports_a_sound_store_and_the_interrupted_jobs(studied, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    done = cli(home, "doctor")
    assert done.returncode == 0, done.stdout
    text = " ".join(done.stdout.replace("│", " ").split())
    assert "every table readable ok" in text and "checkpoints match their hashes ok" in text, done.stdout
    assert "stored events match the event logs ok" in text and "schema version ok" in text


def _keep_only_the_earliest_with(home: Path, studies: int) -> Path:
    """Delete every backup but the oldest one that holds `studies` studies; that one."""
    kept = None
    for copy in backups.listed(home):
        with Store(home, path=copy, read_only=True) as store:
            count = store.value("SELECT count(*) FROM studies")
        if kept is None and count == studies:
            kept = copy
        else:
            copy.unlink()
    assert kept is not None
    return kept


def test_repair_from_the_lock_backup_replays_the_evaluation_and_audits(studied, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    finished = _studies(home)[0]
    original = {k: v for k, v in _exports(home, tmp_path / "before").items() if k[0] == finished}
    kept = _keep_only_the_earliest_with(home, 1)
    with Store(home, path=kept, read_only=True) as store:  # the lock's copy: nothing scored yet
        assert store.value("SELECT count(*) FROM metrics") == 0
    _delete(home / "hierconsole.duckdb")
    for record in home.glob("studies/half-*/study.json"):
        record.unlink()  # as an older hierconsole left it: no record of the half study's creation
    repaired = cli(home, "doctor", "--repair", timeout=600)
    # Rebuilt; the check after it names the lost study's job folder (no job row) as a problem.
    assert repaired.returncode == 1 and "rebuilt" in repaired.stdout, repaired.stdout + repaired.stderr
    said = " ".join(repaired.stdout.split())
    assert "not in the rebuilt store" in said and "half-" in said  # created after that backup
    after = _exports(home, tmp_path / "after")
    assert {k: v for k, v in after.items() if k[0] == finished} == original


@pytest.mark.parametrize("damage", DAMAGES)
def test_repair_rebuilds_the_store_and_resume_finishes(studied, uninterrupted, tmp_path, damage):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    original = _exports(home, tmp_path / "before")
    kept = _keep_only_the_earliest_with(home, 2)
    with Store(home, path=kept, read_only=True) as store:  # the half study barely begun in it
        assert store.value("SELECT count(*) FROM epochs e JOIN runs r USING (run_id) WHERE r.study_id LIKE 'half-%'") == 0
    path = home / "hierconsole.duckdb"
    DAMAGES[damage](path)
    damaged_bytes = path.read_bytes() if path.exists() else None
    if damage != "garbled":  # a garbled block may lie where no command reads it
        one_line_error(cli(home, "runs"))
    checked = cli(home, "doctor")
    assert checked.returncode == 1 and "problem" in checked.stdout and "Traceback" not in checked.stderr

    repaired = cli(home, "doctor", "--repair", timeout=600)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "rebuilt" in repaired.stdout
    if damaged_bytes is not None:
        (aside,) = home.glob("hierconsole.damaged-*.duckdb")
        assert aside.read_bytes() == damaged_bytes
    after = _exports(home, tmp_path / "after")
    assert after == original, _differing_lines(after, original)

    resumed = cli(home, "resume", timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    half = _studies(home)[1]
    assert _final_models(home, half) == uninterrupted


def test_repair_without_a_backup_is_one_line(studied, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    shutil.rmtree(home / "backups")
    _truncate(home / "hierconsole.duckdb")
    text = one_line_error(cli(home, "doctor", "--repair"))
    assert "no readable backup" in text and "untouched" in text


# -- issue 39: a repair that refuses a held store, leaves a healthy one alone, keeps every study with event
# logs in the home, and falls back past a damaged newest backup.

LONG = [*TINY_RUN, "--epochs", "40", "--seeds", "42", "--set", "study.name='long'"]


def _aside_files(home: Path) -> list[Path]:
    """What a repair leaves beside the store: the damaged file moved aside, a rebuild under way."""
    return sorted([*home.glob("hierconsole.damaged-*"), *home.glob(".hierconsole.rebuilding-*")])


def test_repair_refuses_while_a_run_holds_the_store(tmp_path, tiny_fs):
    home = _new_home(tmp_path / "home", tiny_fs)
    store = home / "hierconsole.duckdb"
    run = subprocess.Popen(cli_argv(home, *LONG), env=OFTEN, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Training: the run holds the store (and has taken backups, which the old repair rebuilt from).
        wait_for(lambda: any(home.glob("studies/long-*/jobs/*/checkpoints/ckpt-*.pt")), timeout=300, what="a checkpoint")
        assert run.poll() is None, "the run ended before the repair could be tried; lengthen LONG"
        inode = store.stat().st_ino
        text = one_line_error(cli(home, "doctor", "--repair", timeout=600))
        assert f"PID {run.pid}" in text and "nothing was changed" in text, text
        assert store.stat().st_ino == inode and not _aside_files(home)
        out, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    (study,) = _studies(home)
    assert study in out
    exports = _exports(home, tmp_path / "exports")  # its runs, metrics and audits read
    assert all(text.strip() for text in exports.values()), exports


def test_repair_leaves_a_healthy_store_alone(studied, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    before = tree_digest(home)
    done = cli(home, "doctor", "--repair", timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert len(done.stdout.strip().splitlines()) == 1 and "healthy" in said and "nothing" in said, done.stdout
    assert tree_digest(home) == before and not _aside_files(home)


def test_forced_repair_says_first_what_it_drops(studied, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    half = _studies(home)[1]
    _keep_only_the_earliest_with(home, 1)  # taken before the half study was created
    (home / "studies" / half / "study.json").unlink(missing_ok=True)  # as an older hierconsole left its folder
    done = cli(home, "doctor", "--repair", "--force", timeout=600)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    said = " ".join(done.stdout.split())
    assert "drop" in said and half in said and "rebuilt" in said, done.stdout + done.stderr
    assert said.index(half) < said.index(f"rebuilt {home}"), said  # said before it was done
    assert _studies(home) == [s for s in _studies(aside_store(home)) if s != half]


def aside_store(home: Path) -> Path:
    """A home holding only the store a forced repair kept aside (healthy, it was replaced all the same)."""
    (aside,) = home.glob("hierconsole.damaged-*.duckdb")
    other = home.parent / "aside"
    other.mkdir()
    shutil.copyfile(aside, other / "hierconsole.duckdb")
    return other


def test_a_study_created_after_the_newest_backup_survives_a_repair(studied, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    original = _exports(home, tmp_path / "before")
    _keep_only_the_earliest_with(home, 1)  # the lock's copy of the finished study: no half study in it
    _delete(home / "hierconsole.duckdb")
    repaired = cli(home, "doctor", "--repair", timeout=600)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "not in the rebuilt store" not in " ".join(repaired.stdout.split())
    after = _exports(home, tmp_path / "after")
    assert after == original, _differing_lines(after, original)


def _garble_last_block(path: Path) -> None:
    """Garble the file's last block (the catalog's and free list's): a read-only open reads every table
    of it, and only an open for writing (the rebuild's) meets the damage."""
    data = bytearray(path.read_bytes())
    with duckdb.connect(str(path), read_only=True) as con:
        size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        # The catalog's block: the file's last block may be a free one (the layout is DuckDB's to choose).
        block = con.execute("SELECT max(block_id) FROM pragma_metadata_info()").fetchone()[0]
    start = 3 * 4096 + block * size
    data[start + 8 : start + size] = os.urandom(size - 8)
    path.write_bytes(bytes(data))


def _garble_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4096 : 3 * 4096] = os.urandom(2 * 4096)
    path.write_bytes(bytes(data))


BACKUP_DAMAGES = {"garbled": _garble, "last block garbled": _garble_last_block, "header garbled": _garble_header, "truncated": _truncate}


@pytest.mark.parametrize("damage", BACKUP_DAMAGES)
def test_repair_falls_back_past_a_damaged_newest_backup(studied, tmp_path, damage):
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    original = _exports(home, tmp_path / "before")
    _delete(home / "hierconsole.duckdb")
    *_, older, newest = backups.listed(home)
    BACKUP_DAMAGES[damage](newest)
    repaired = cli(home, "doctor", "--repair", timeout=600)
    assert "Traceback" not in repaired.stdout + repaired.stderr, repaired.stderr
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    said = " ".join(repaired.stdout.split())
    assert said.count(newest.name) == 1 and "skipped" in said, said  # one note names it
    assert f"from the backup {older}" in said, said
    after = _exports(home, tmp_path / "after")
    assert after == original, _differing_lines(after, original)


def test_a_family_created_after_the_newest_backup_survives_a_repair(studied, tmp_path):
    """Its member studies come back from their records, and the family's own rows (members, overrides,
    definition) from the family's record, so `families` and the contrasts read as before."""
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    path = family_file(
        tmp_path / "fam.toml", "fam", {"a": {}, "b": {"training.lr": 2e-3}}, [], {"training.epochs": 1, "training.seeds": [42]}
    )
    family = cli(home, "run", str(path), env=AT_LOCK, timeout=600)
    assert family.returncode == 0, family.stdout + family.stderr
    with Store(home, read_only=True) as store:
        before = store.rows("SELECT * FROM families ORDER BY ALL"), store.rows("SELECT * FROM family_members ORDER BY ALL")
    original = _exports(home, tmp_path / "before")
    _keep_only_the_earliest_with(home, 2)  # the finished and the half study: the family came after
    _delete(home / "hierconsole.duckdb")
    repaired = cli(home, "doctor", "--repair", timeout=600)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    said = " ".join(repaired.stdout.split())
    assert "family fam-" in said and "cannot restore" not in said, said
    with Store(home, read_only=True) as store:
        after = store.rows("SELECT * FROM families ORDER BY ALL"), store.rows("SELECT * FROM family_members ORDER BY ALL")
    assert after == before
    # Its members locked after the backup: the replay locks them again, so the times their lock audit
    # names are the repair's (README); its verdict, and every other value, are the original's.
    exported, original = _lock_times_dropped(_exports(home, tmp_path / "after")), _lock_times_dropped(original)
    assert exported == original, _differing_lines(exported, original)


def _lock_times_dropped(exports: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    def line(text: str) -> str:
        return text.split(',"last final run finished', 1)[0] if ",test_read_after_lock," in text else text

    return {key: "\n".join(line(t) for t in text.splitlines()) for key, text in exports.items()}


def test_repair_leaves_a_store_of_an_older_schema_to_the_next_writing_command(fixed_copy, capsys):
    """Sound, only older (a hierconsole upgraded since): a read-only open refuses it as needing an upgrade,
    which the repair once took for damage, rebuilding it from the newest backup with nothing announced."""
    path = fixed_copy / "hierconsole.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION - 1)])
    before = tree_digest(fixed_copy)
    assert main(["--home", str(fixed_copy), "doctor", "--repair"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "nothing was done" in said, said
    assert tree_digest(fixed_copy) == before and not list(fixed_copy.glob("hierconsole.damaged-*"))


def test_a_damaged_study_record_is_that_studys_loss_not_the_repairs(studied, tmp_path):
    """A record that cannot be restored (hand-edited, its keys SQL) is named as lost; the rest is rebuilt
    from the same backup (every older backup lacks that study too, so skipping the backup ended the repair)."""
    home = tmp_path / "home"
    shutil.copytree(studied, home)
    original = _exports(home, tmp_path / "before")
    _keep_only_the_earliest_with(home, 1)
    (record,) = home.glob("studies/half-*/study.json")
    bad = json.loads(record.read_text())
    bad["study"]["phase) VALUES (1); DROP TABLE runs; --"] = "x"
    record.write_text(json.dumps(bad))
    _delete(home / "hierconsole.duckdb")
    repaired = cli(home, "doctor", "--repair", timeout=600)
    assert repaired.returncode in (0, 1) and "Traceback" not in repaired.stderr, repaired.stdout + repaired.stderr
    said = " ".join(repaired.stdout.split())
    assert f"cannot restore them: {record.parent.name}" in said and "columns this hierconsole never writes" in said, said
    finished = _studies(home)
    assert len(finished) == 1 and not finished[0].startswith("half")
    after = _exports(home, tmp_path / "after")
    assert after == {k: v for k, v in original.items() if k[0] == finished[0]}


def test_a_store_created_while_a_missing_one_is_repaired_is_not_moved_aside(studied, tmp_path):
    """A missing store cannot be held against writers: a hierconsole started during the repair may create
    one (the store refuses to, in a home with job folders; not in one without). Its work must not become
    `hierconsole.damaged-*` under the rebuilt store, the process writing on, unseen."""
    from hierconsole.study.commands import doctor

    home = tmp_path / "home"
    shutil.copytree(studied, home)
    _delete(home / "hierconsole.duckdb")

    def a_run_starts(rebuild: doctor.Rebuild) -> None:  # the moment before the swap: a file another process made
        with duckdb.connect(str(home / "hierconsole.duckdb")) as con:
            con.execute("CREATE TABLE made_by AS SELECT 'a run started meanwhile' AS who")

    with pytest.raises(StoreBusyError, match="created while the repair ran"):
        doctor.repair(home, announce=a_run_starts)
    with duckdb.connect(str(home / "hierconsole.duckdb"), read_only=True) as con:
        assert con.execute("SELECT who FROM made_by").fetchone() == ("a run started meanwhile",)
    assert not list(home.glob("hierconsole.damaged-*")) and not list(home.glob(".hierconsole.rebuilding-*"))
