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
import polars as pl

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


def _upsert(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: dict) -> None:
    """INSERT OR REPLACE many rows in one statement (one per event costs ~10 ms in DuckDB).

    `rows` maps each primary key to its row, so a key that occurs twice in a batch (a replayed event)
    keeps its last version: DuckDB refuses to replace the same row twice in one statement.
    """
    if not rows:
        return
    frame = pl.DataFrame(list(rows.values()), schema=list(columns), orient="row", infer_schema_length=None)
    name = f"_incoming_{table}"
    con.register(name, frame)
    try:
        cols = ", ".join(columns)
        con.execute(f"INSERT OR REPLACE INTO {table} ({cols}) SELECT {cols} FROM {name}")
    finally:
        con.unregister(name)


_EVENT_COLUMNS = ("job_id", "key", "kind", "payload", "ts")
_RUN_COLUMNS = (
    "run_id",
    "job_id",
    "study_id",
    "kind",
    "seed",
    "arm",
    "geometry",
    "loss",
    "tau",
    "trainable_params",
    "init_sha256",
)
_EPOCH_COLUMNS = ("run_id", "epoch", "train_loss", "updates", "batch_sha256", "seconds")
_VAL_COLUMNS = ("run_id", "epoch", "aggregation", "level", "metric", "value")
_METRIC_COLUMNS = (
    "study_id",
    "run_id",
    "seed",
    "arm",
    "perturbation",
    "aggregation",
    "level",
    "metric",
    "value",
    "posthoc",
)


def apply_events(
    con: duckdb.DuckDBPyConnection,
    job_id: str,
    study_id: str,
    kind: str,
    seed: int,
    events: Iterable[dict[str, Any]],
) -> None:
    """Write `events` of one job inside the caller's transaction, in a few bulk statements."""
    logged: dict = {}
    inits: dict = {}
    epochs: dict = {}
    vals: dict = {}
    metrics: dict = {}
    finals: list[list[Any]] = []
    norms: list[list[Any]] = []
    start: list[Any] | None = None
    last_epoch = 0
    for ev in events:
        ts = datetime.fromtimestamp(float(ev.get("ts", 0.0)), tz=UTC).replace(tzinfo=None)
        payload = json.dumps(_sanitize(ev), allow_nan=False, default=str)
        logged[ev["key"]] = (job_id, ev["key"], ev["kind"], payload, ts)
        k = ev["kind"]
        run_id = f"{job_id}/{ev['cell']}" if "cell" in ev else None
        if k == "start":
            start = [ev["device"], ev["threads"], job_id]
        elif k == "init":
            inits[run_id] = (
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
            )
        elif k == "epoch":
            epochs[(run_id, ev["epoch"])] = (
                run_id,
                ev["epoch"],
                _finite(ev["train_loss"]),
                ev["updates"],
                ev["batch_sha256"],
                ev.get("seconds"),
            )
            last_epoch = max(last_epoch, int(ev["epoch"]))
        elif k == "val":
            for level in LEVELS:
                for metric, value in ev["metrics"][level].items():
                    key = (run_id, ev["epoch"], ev["aggregation"], level, metric)
                    vals[key] = (*key, _finite(value))
        elif k == "final":
            finals.append(
                [
                    ev["final_sha256"],
                    ev["updates"],
                    ev["reload_max_diff"],
                    ev["best_epoch"] if ev["best_epoch"] >= 0 else None,
                    _finite(ev["best_score"]),
                    run_id,
                ]
            )
        elif k == "metrics":
            for level in LEVELS:
                for metric, value in ev["metrics"][level].items():
                    key = (ev["run_id"], ev["perturbation"], ev["aggregation"], level, metric)
                    metrics[key] = (
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
        elif k == "norms":
            norms.append([ev["max_norm"], ev["radius"], ev["bound"], ev["run_id"]])
    _upsert(con, "events", _EVENT_COLUMNS, logged)
    _upsert(con, "runs", _RUN_COLUMNS, inits)
    _upsert(con, "epochs", _EPOCH_COLUMNS, epochs)
    _upsert(con, "val_metrics", _VAL_COLUMNS, vals)
    _upsert(con, "metrics", _METRIC_COLUMNS, metrics)
    if start is not None:
        con.execute("UPDATE jobs SET device = ?, threads = ? WHERE job_id = ?", start)
    if last_epoch:
        con.execute(
            "UPDATE jobs SET epochs_done = greatest(epochs_done, ?) WHERE job_id = ?", [last_epoch, job_id]
        )
    if finals:
        con.executemany(
            "UPDATE runs SET final_sha256 = ?, updates = ?, reload_max_diff = ?, best_epoch = ?, best_score = ? "
            "WHERE run_id = ?",
            finals,
        )
    if norms:
        con.executemany(
            "UPDATE runs SET max_norm = ?, ball_radius = ?, norm_bound = ? WHERE run_id = ?", norms
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
