"""Turning worker events into store rows. Every write is keyed, so replaying a whole events.jsonl
after a crash of the orchestrator rewrites the same rows and never duplicates them."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from hierconsole.levels import LEVELS


def read_events(path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete lines from `offset` on, and the offset after the last complete line.

    A worker killed mid-write leaves a torn last line; it is left for a later read (or ignored for good
    if the worker is gone, since its content is re-emitted by the resumed run).
    """
    if not path.exists():
        return [], offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    events = []
    for raw in data[: end + 1].splitlines():
        if not raw.strip():
            continue
        try:
            events.append(json.loads(raw))
        except json.JSONDecodeError:
            continue  # a torn line followed by a newer write: the resumed run re-emits it
    return events, offset + end + 1


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def apply_events(
    con: duckdb.DuckDBPyConnection,
    job_id: str,
    study_id: str,
    kind: str,
    seed: int,
    events: Iterable[dict[str, Any]],
) -> None:
    """Write `events` of one job inside the caller's transaction."""
    for ev in events:
        ts = datetime.fromtimestamp(float(ev.get("ts", 0.0)), tz=UTC).replace(tzinfo=None)
        con.execute(
            "INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?)",
            [job_id, ev["key"], ev["kind"], json.dumps(_sanitize(ev), allow_nan=False, default=str), ts],
        )
        k = ev["kind"]
        if k == "start":
            con.execute(
                "UPDATE jobs SET device = ?, threads = ? WHERE job_id = ?",
                [ev["device"], ev["threads"], job_id],
            )
        elif k == "init":
            run_id = f"{job_id}/{ev['cell']}"
            con.execute(
                "INSERT OR REPLACE INTO runs (run_id, job_id, study_id, kind, seed, arm, geometry, loss, tau, "
                "trainable_params, init_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    job_id,
                    study_id,
                    kind,
                    seed,
                    ev["arm"],
                    ev["geometry"],
                    ev["loss"],
                    ev["tau"],
                    ev["trainable_params"],
                    ev["init_sha256"],
                ],
            )
        elif k == "epoch":
            run_id = f"{job_id}/{ev['cell']}"
            con.execute(
                "INSERT OR REPLACE INTO epochs VALUES (?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    ev["epoch"],
                    _finite(ev["train_loss"]),
                    ev["updates"],
                    ev["batch_sha256"],
                    ev.get("seconds"),
                ],
            )
            con.execute(
                "UPDATE jobs SET epochs_done = greatest(epochs_done, ?) WHERE job_id = ?",
                [ev["epoch"], job_id],
            )
        elif k == "val":
            run_id = f"{job_id}/{ev['cell']}"
            con.executemany(
                "INSERT OR REPLACE INTO val_metrics VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (run_id, ev["epoch"], ev["aggregation"], level, metric, _finite(value))
                    for level in LEVELS
                    for metric, value in ev["metrics"][level].items()
                ],
            )
        elif k == "final":
            con.execute(
                "UPDATE runs SET final_sha256 = ?, updates = ?, reload_max_diff = ?, best_epoch = ?, "
                "best_score = ? WHERE run_id = ?",
                [
                    ev["final_sha256"],
                    ev["updates"],
                    ev["reload_max_diff"],
                    ev["best_epoch"] if ev["best_epoch"] >= 0 else None,
                    _finite(ev["best_score"]),
                    f"{job_id}/{ev['cell']}",
                ],
            )
        elif k == "metrics":
            con.executemany(
                "INSERT OR REPLACE INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        study_id,
                        ev["run_id"],
                        ev["seed"],
                        ev["arm"],
                        ev["perturbation"],
                        ev["aggregation"],
                        level,
                        metric,
                        _finite(value),
                        bool(ev.get("posthoc", False)),
                    )
                    for level in LEVELS
                    for metric, value in ev["metrics"][level].items()
                ],
            )
        elif k == "norms":
            con.execute(
                "UPDATE runs SET max_norm = ?, ball_radius = ?, norm_bound = ? WHERE run_id = ?",
                [ev["max_norm"], ev["radius"], ev["bound"], ev["run_id"]],
            )


def _sanitize(x: Any) -> Any:
    """NaN and infinities become null: the JSON column holds standard JSON only."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _sanitize(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_sanitize(v) for v in x]
    return x
