"""The CLI's own output, as the notebook API's tests compare it: the real command in a subprocess, and
every number of its JSON checked equal (not close) to the API's frames."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl

from hierconsole.study.analysis.statistics import EVIDENCE_KEYS


def cli(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_json(home: Path, *args: str) -> Any:
    done = cli(home, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


SUMMARY_KEYS = ("mean", "sd", "positive_seeds", "n_seeds", *EVIDENCE_KEYS)


def assert_long_equals(frame: pl.DataFrame, expected: dict[tuple, dict], keys: tuple[str, ...], unit: str = "seed",
                       summary_keys: tuple[str, ...] = SUMMARY_KEYS, per_unit: str = "per_seed") -> None:  # fmt: skip
    """`expected`: key tuple -> the JSON entry (`per_seed` and the summary). Every entry's every per-seed
    value and summary value is in the long frame, once per seed, and the frame holds nothing else."""
    rows = frame.to_dicts()
    assert len(rows) == sum(len(e[per_unit]) for e in expected.values()) > 0
    seen = set()
    for row in rows:
        key = tuple(row[k] for k in keys)
        entry = expected[key]
        assert row["value"] == entry[per_unit][str(row[unit])], (key, row[unit])
        for k in summary_keys:
            assert row[k] == entry[k], (key, k)
        seen.add((key, row[unit]))
    assert len(seen) == len(rows)


def assert_summary_equals(frame: pl.DataFrame, expected: dict[tuple, dict], keys: tuple[str, ...],
                          summary_keys: tuple[str, ...] = SUMMARY_KEYS) -> None:  # fmt: skip
    rows = {tuple(r[k] for k in keys): r for r in frame.to_dicts()}
    assert set(rows) == set(expected)
    for key, entry in expected.items():
        for k in summary_keys:
            assert rows[key][k] == entry[k], (key, k)


def effect_entries(doc: dict) -> dict[tuple, dict]:
    """(group, metric, effect) -> entry of `effects --json` (simple effects and baseline contrasts)."""
    return {
        (group, metric, name): entry
        for group in ("effects", "baseline_contrasts")
        for metric, by_name in doc[group].items()
        for name, entry in by_name.items()
    }


def table_cells(line: str) -> list[str]:
    """A table line's words, the box's rules dropped."""
    return line.replace("│", " ").replace("┃", " ").split()
