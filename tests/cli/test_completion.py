"""Shell completion, asked for as a shell asks: the CLI in a subprocess with argcomplete's variables
(`_ARGCOMPLETE`, `COMP_LINE`, `COMP_POINT`, the answer in `_ARGCOMPLETE_STDOUT_FILENAME`), and once through
bash itself with the script `hierconsole completion bash` prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hierconsole.config import load_preset
from tests.stores.fixed import COMPLETE, LIVE

pytestmark = pytest.mark.slow  # the CLI in subprocesses

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted(p.stem for p in (ROOT / "presets").glob("*.toml"))
FAMILIES = sorted(p.stem for p in (ROOT / "presets" / "families").glob("*.toml"))
IFS = "\013"  # argcomplete's separator between completions


def _flat_keys(table: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else key
        out += _flat_keys(value, path) if isinstance(value, dict) else [path]
    return out


def complete(line: str, tmp_path: Path, python: tuple[str, ...] = ()) -> tuple[set[str], str]:
    """The completions of `line` (the cursor at its end), and what the process wrote to stderr."""
    answer = tmp_path / "completions"
    answer.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, *python, "-m", "hierconsole"],
        env={
            **os.environ,
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    words = answer.read_text().split(IFS) if answer.exists() else []
    return {w.rstrip() for w in words if w}, done.stderr


def test_commands_complete(tmp_path):
    assert complete("hierconsole ru", tmp_path)[0] == {"run", "runs"}
    assert complete("hierconsole compl", tmp_path)[0] == {"completion"}
    assert complete("hierconsole completion ", tmp_path)[0] == {"bash", "zsh"}


def test_presets_and_families_complete_for_run(tmp_path):
    got, _ = complete("hierconsole run ", tmp_path)
    assert set(PRESETS) | set(FAMILIES) <= got and "demo" in got
    assert complete("hierconsole run nabirds-s", tmp_path)[0] == {"nabirds-semantic-control", "nabirds-seen-class"}
    assert complete("hierconsole run nabirds-sem", tmp_path)[0] == {"nabirds-semantic-control"}


def test_set_keys_come_from_the_preset_schema(tmp_path):
    # Every option of the preset's document, and the options it leaves out while they are unset (the levels,
    # the factorial, other geometries' temperature: not hashed then, so the paper's presets keep their hashes).
    unset = (
        "training.levels", "evaluation.hier_levels", "evaluation.metrics", "factorial.geometries", "factorial.losses",
        "temperature.others",
    )
    keys = {*_flat_keys(load_preset("demo").to_dict()), *unset}
    got, _ = complete("hierconsole run demo --set training.l", tmp_path)
    assert got == {f"{k}=" for k in keys if k.startswith("training.l")} and "training.lr=" in got
    got, _ = complete("hierconsole run demo --set ", tmp_path)
    assert got == {f"{k}=" for k in keys}


def test_study_ids_come_from_the_home(fixed_home, tmp_path):
    home = f"hierconsole --home {fixed_home}"
    assert complete(f"{home} effects demo-", tmp_path)[0] == {COMPLETE, LIVE}
    assert complete(f"{home} audit demo-c", tmp_path)[0] == {COMPLETE}
    assert complete(f"{home} export mlflow demo-l", tmp_path)[0] == {LIVE}
    assert complete(f"{home} export runs --study demo-c", tmp_path)[0] == {COMPLETE}
    assert FAMILIES[0] in complete(f"{home} report ", tmp_path)[0]  # STUDY|FAMILY: both
    datasets = {p.name for p in (fixed_home / "datasets").iterdir()}
    assert datasets and complete(f"{home} run demo --dataset ", tmp_path)[0] == datasets
    assert complete(f"{home} datasets delete ", tmp_path)[0] == datasets


def test_a_completion_never_fails_nor_imports_torch(fixed_home, tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("not a home")
    for home in (tmp_path / "missing", not_a_folder):
        got, err = complete(f"hierconsole --home {home} audit ", tmp_path)
        assert not any(w.startswith("demo") for w in got) and "Traceback" not in err
    # What the interpreter imported (-X importtime names every module on stderr): never torch nor geoopt.
    for line in ("effects demo-", "run demo --set training.l", "export ", "run "):
        got, err = complete(f"hierconsole --home {fixed_home} {line}", tmp_path, python=("-X", "importtime"))
        imported = {
            row.rsplit("|", 1)[-1].strip() for row in err.splitlines() if row.startswith("import time:")
        }
        assert got and len(imported) > 50, line
        assert not {m for m in imported if m.partition(".")[0] in ("torch", "geoopt")}, line


def test_the_printed_scripts_and_a_bash_round_trip(fixed_home, tmp_path):
    script = subprocess.run(
        [sys.executable, "-m", "hierconsole", "completion", "bash"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert script.returncode == 0 and "complete " in script.stdout and "hierconsole" in script.stdout
    zsh = subprocess.run(
        [sys.executable, "-m", "hierconsole", "completion", "zsh"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef hierconsole")
    fish = subprocess.run(
        [sys.executable, "-m", "hierconsole", "completion", "fish"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fish.returncode == 2 and "bash, zsh" in fish.stderr and "Traceback" not in fish.stderr
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    # The script as a user evals it, with `hierconsole` on PATH, and bash's own completion variables.
    program = tmp_path / "bin" / "hierconsole"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nexec {sys.executable} -m hierconsole "$@"\n')
    program.chmod(0o755)
    words = ["hierconsole", "--home", str(fixed_home), "audit", "demo-c"]
    probe = (
        'eval "$(hierconsole completion bash)"\n'
        f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}\n"
        'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}\n'
        "_python_argcomplete hierconsole\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{program.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([bash, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert [w.strip() for w in done.stdout.splitlines() if w.strip()] == [COMPLETE]


def test_help_lists_the_presets_and_the_families():
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0
    listed = done.stdout.split("shipped presets", 1)[1]
    presets, families = listed.split("shipped families", 1)
    assert {w.strip(",") for w in presets.split(":", 1)[1].split()} == set(PRESETS)
    assert {w.strip(",") for w in families.split(":", 1)[1].split()} == set(FAMILIES)
