"""`hierconsole replicate --scale smoke` end to end on generated CUB- and NABirds-layout folders (images made
here, a tiny random-weight backbone, a generated checklist): every stage runs, the tables are written
beside the paper's values, a second run does no work, a changed image is named, and a replication killed
during extraction, during a factorial and during the tables ends with byte-identical tables."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.homes import copy_home
from tests.replicated import (
    GROUP,
    RID,
    child_commands,
    recording_children,
    replicate,
    replicate_argv,
)

pytest.importorskip("transformers", reason="the 'extract' extra is not installed")
pytest.importorskip("matplotlib", reason="the 'plot' extra is not installed (the report stage needs it)")

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(GROUP)]  # the session's replication


def _differences(got: dict[str, bytes], want: dict[str, bytes]) -> str:
    """The lines that differ, file by file (pytest's own diff of a dozen large byte strings is cut off
    before it reaches them)."""
    out = [f"files only in one: {sorted(set(got) ^ set(want))}"] if set(got) != set(want) else []
    for name in sorted(set(got) & set(want)):
        if got[name] != want[name]:
            a, b = got[name].decode().splitlines(), want[name].decode().splitlines()
            out += [f"{name}: -{x!r} +{y!r}" for x, y in zip(a, b, strict=False) if x != y]
            if len(a) != len(b):
                out.append(f"{name}: {len(a)} lines against {len(b)}")
    return "\n".join(out)


def _audits(home: Path) -> str:
    """Every audit's result and evidence as `audit` prints them: what a differing S12 row is judged by."""
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), "export", "audits", "-o", "-"],
        capture_output=True, text=True, timeout=300,
    )
    return done.stdout + done.stderr


def _tables(home: Path) -> dict[str, bytes]:
    (folder,) = (home / "replications").iterdir()
    # The report names the home's study ids, which differ between homes; the tables name none.
    return {p.name: p.read_bytes() for p in sorted((folder / "tables").iterdir()) if p.suffix != ".html"}


@pytest.fixture
def data(replicate_data: Path) -> Path:
    """The session's generated dataset folders (the ones its replication `replicated_cub` ran on)."""
    return replicate_data


def test_smoke_replication_end_to_end_then_nothing_to_do(replicated_cub, data, tmp_path):
    # Every stage runs in this process through the front door; only each dataset's extraction is a child:
    # CUB's from scratch (the session's replication), then NABirds' added to a copy of it.
    assert replicated_cub.children == ["extract"]
    home = copy_home(replicated_cub.home, tmp_path / "home")
    env, log = recording_children(tmp_path)
    done = replicate(home, data, "cub", "nabirds", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert child_commands(log) == ["extract"]
    tables = _tables(home)
    every = ("sec-S1", "main-1", "main-2", "sec-5.1", "sec-5.2", "sec-5.5-cub", "sec-5.5-nabirds", "sec-5.5-cub-factorial")
    for table in (*every, *(f"S{n}" for n in range(1, 13))):
        assert {f"{table}.csv", f"{table}.md", f"{table}.tex"} <= set(tables), table
    main = pl.read_csv(home / "replications" / RID / "tables" / "main-1.csv")
    assert set(main["dataset"]) == {"cub", "nabirds"}
    assert set(main.filter(pl.col("column") == "hier_mAP")["row"]) >= {"E_R", "H_R", "E_S", "H_S"}
    assert not main["comparable"].any()  # smoke budgets: shown beside the paper's, never compared
    effects = pl.read_csv(home / "replications" / RID / "tables" / "sec-5.2.csv")
    cub = effects.filter(pl.col("dataset") == "cub").sort("row")
    assert cub["published"].null_count() == 0  # the paper's CUB effects stand beside the measured ones
    assert ((cub["measured"] - cub["published"]) - cub["difference"]).abs().max() < 1e-12

    again = replicate(home, data, "cub", "nabirds")
    assert again.returncode == 0 and "0 stages ran" in again.stdout, again.stdout + again.stderr
    assert _tables(home) == tables

    image = next((data / "CUB_200_2011" / "images").rglob("*.png"))
    original = image.read_bytes()
    try:
        image.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        plan = replicate(home, data, "cub", "nabirds", extra=("--dry-run",))
        assert plan.returncode == 0, plan.stderr
        assert "extract-cub        stale" in plan.stdout and "extract-nabirds    done" in plan.stdout
        assert "changed inputs: extract-cub" in plan.stdout
    finally:
        image.write_bytes(original)
    checklist = data / "checklist.csv"
    listed = checklist.read_text()
    try:
        checklist.write_text(listed.replace("Familyidae0 (Birds 0)", "Otheridae (Birds 0)"))
        plan = replicate(home, data, "cub", "nabirds", extra=("--dry-run",))
        assert "taxonomy-cub       stale" in plan.stdout and "extract-cub        done" in plan.stdout, plan.stdout
    finally:
        checklist.write_text(listed)
    _outputs_are_rebuilt_where_they_are_missing(home, data, tables)
    _a_redo_that_finds_its_studies_keeps_the_measured_time(home, data)
    _a_dataset_run_alone_keeps_the_others_tables(home, data, tables)


def _outputs_are_rebuilt_where_they_are_missing(home: Path, data: Path, tables: dict[str, bytes]) -> None:
    """As a reviewer met it: a deleted table stayed deleted ("0 stages ran"), and --out naming a new folder
    said the tables were there while nothing was written."""
    (home / "replications" / RID / "tables" / "main-1.csv").unlink()
    again = replicate(home, data, "cub", "nabirds")
    assert again.returncode == 0 and "tables: main-1.csv is not in" in again.stdout, again.stdout + again.stderr
    assert _tables(home) == tables
    elsewhere = home.parent / "elsewhere"
    moved = replicate(home, data, "cub", "nabirds", extra=("--out", str(elsewhere)))
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir() if p.suffix != ".html"} == tables
    assert {"report-cub.html", "report-nabirds.html"} <= {p.name for p in elsewhere.iterdir()}


def _last_time(home: Path, data: Path, stage: str) -> str:
    plan = replicate(home, data, "cub", "nabirds", extra=("--dry-run",))
    (line,) = [line for line in plan.stdout.splitlines() if line.split()[:1] == [stage]]
    return line.rsplit("last ", 1)[1]


def _a_redo_that_finds_its_studies_keeps_the_measured_time(home: Path, data: Path) -> None:
    """As a reviewer met it: `--redo families-cub` with nothing changed kept the complete family (no
    retraining) and recorded its 0.4 s, which the next estimate then scaled every family by."""
    before = _last_time(home, data, "families-cub")
    redo = replicate(home, data, "cub", "nabirds", extra=("--redo", "families-cub"))
    assert redo.returncode == 0, redo.stdout + redo.stderr
    assert _last_time(home, data, "families-cub") == before


def _a_dataset_run_alone_keeps_the_others_tables(home: Path, data: Path, tables: dict[str, bytes]) -> None:
    """As a reviewer met it: `replicate --nabirds` alone in a replication that had finished CUB deleted
    CUB's tables and said they needed factorial-cub, a stage that was done."""
    alone = replicate(home, data, "nabirds")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert _tables(home) == tables
    assert (home / "replications" / RID / "tables" / "report-cub.html").is_file()
    plan = replicate(home, data, "nabirds", extra=("--dry-run",))
    assert "carried: the finished studies of cub" in plan.stdout and "omitted" not in plan.stdout, plan.stdout


def _kill_when(home: Path, base: Path, ready) -> None:  # noqa: ANN001
    """Start a CUB replication and SIGKILL it (it alone: its commands die with it) once `ready(home)`."""
    proc = subprocess.Popen(replicate_argv(home, base, "cub"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while not ready(home) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the replication ended before the point it was to be killed at"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)


def _log_has(stage: str, text: str):  # noqa: ANN202
    def ready(home: Path) -> bool:
        logs = list((home / "replications").glob(f"*/logs/{stage}.log"))
        return bool(logs) and text in logs[0].read_text(errors="replace")

    return ready


def _final_runs_started(home: Path) -> bool:
    return any(home.glob("studies/*.cub-factorial-*/jobs/final-*/events.jsonl"))


def _tables_started(home: Path) -> bool:
    return any((home / "replications").glob("*/tables/*.csv"))


def test_killed_during_extraction_a_factorial_and_the_tables_ends_with_identical_tables(replicated_cub, data, tmp_path):
    clean = replicated_cub.home  # the same replication, never killed

    home = tmp_path / "killed"
    _kill_when(home, data, _log_has("extract-cub", "$ hierconsole extract"))
    _kill_when(home, data, _final_runs_started)
    _kill_when(home, data, _tables_started)
    finished = replicate(home, data, "cub")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert _tables(home) == _tables(clean), (
        f"{_differences(_tables(home), _tables(clean))}\nkilled:\n{_audits(home)}\nclean:\n{_audits(clean)}"
    )
    # NABirds added to the same replication: CUB's stages stay done, NABirds' and the tables' are to run.
    plan = replicate(home, data, "cub", "nabirds", extra=("--dry-run",))
    assert plan.returncode == 0, plan.stderr
    for stage in ("extract-cub", "import-cub", "factorial-cub", "families-cub", "rescore-cub"):
        assert f"{stage:<18} done" in plan.stdout, plan.stdout
    assert "extract-nabirds    run" in plan.stdout and "tables             waiting" in plan.stdout, plan.stdout
    # Nothing the replication started is left running.
    leftover = subprocess.run(["pgrep", "-f", str(home)], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout


def test_a_failed_stage_stops_the_extraction_running_beside_it(data, tmp_path):
    # A checklist that lacks one CUB species: `taxonomy build-cub` refuses it while `extract` runs beside it.
    base = tmp_path / "data"
    base.mkdir()
    (base / "CUB_200_2011").symlink_to(data / "CUB_200_2011")
    (base / "tiny-dinov2.json").write_bytes((data / "tiny-dinov2.json").read_bytes())
    lines = (data / "checklist.csv").read_text().splitlines(keepends=True)
    (base / "checklist.csv").write_text("".join(lines[:-1]))
    home = tmp_path / "home"
    failed = replicate(home, base, "cub")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "stage taxonomy-cub failed" in failed.stderr and "Traceback" not in failed.stderr, failed.stderr
    log = (home / "replications" / RID / "logs" / "extract-cub.log").read_text()
    assert "$ hierconsole extract" in log  # it had started, and was stopped rather than waited for
    assert not (home / "replications" / RID / "features" / "cub.npz").exists()
    leftover = subprocess.run(["pgrep", "-f", str(home)], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout
