"""Homes filled by the real CLI and workers: the tiny dataset registered, a family run to the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hierconsole.datasets import FeatureSet
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from tests.tiny import TINY_VALUES


def registered_home(home: Path, tiny_fs: FeatureSet) -> Path:
    """`home` with the tiny synthetic dataset registered (a real store, created on the way)."""
    with Store(home) as store:
        register_dataset(store, tiny_fs)
    return home


def cli(home: Path, *args: str, columns: int | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`hierconsole --home HOME ARGS` in a fresh interpreter; at a fixed terminal width when `columns` is given."""
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb"} if columns else None
    return subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def family_file(
    path: Path,
    name: str,
    members: Mapping[str, Mapping[str, Any]],
    contrasts: Sequence[Mapping[str, str]],
    values: Mapping[str, Any],
) -> Path:
    """A family TOML over the demo preset with the tiny settings plus `values` as its overrides."""
    lines = ["[family]", f'name = "{name}"', 'base = "demo"', "", "[overrides]"]
    lines += [f'"{k}" = {json.dumps(v)}' for k, v in {**TINY_VALUES, **values}.items()]
    for member, overrides in members.items():
        lines += ["", f"[members.{member}]", *(f'"{k}" = {json.dumps(v)}' for k, v in overrides.items())]
    for contrast in contrasts:
        lines += ["", "[[contrasts]]", *(f"{k} = {json.dumps(v)}" for k, v in contrast.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_family(home: Path, path: Path, *, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """`hierconsole run FAMILY.toml` to the end; fails the test with the output if it does not succeed."""
    done = cli(home, "run", str(path), columns=columns, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def member_studies(home: Path) -> dict[str, str]:
    """member -> study id of the home's families, in their order."""
    with Store(home, read_only=True) as store:
        return dict(store.rows("SELECT member, study_id FROM family_members ORDER BY position"))
