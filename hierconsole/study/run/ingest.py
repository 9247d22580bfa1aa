"""Turning worker events into store rows. Every write is keyed, so replaying a whole events.jsonl
after a crash of the orchestrator rewrites the same rows and never duplicates them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from hierconsole.contract import events as ev
from hierconsole.vocabulary import JobKind

if TYPE_CHECKING:
    import duckdb  # write callbacks are handed a connection by Store.write; only study.db opens one


@dataclass(frozen=True)
class JobRef:
    """The job whose events are ingested: the columns its rows carry."""

    job_id: str
    study_id: str
    kind: JobKind
    seed: int


def _finite(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _upsert(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: dict[Any, tuple]) -> None:
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
    "objective_params",
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


def run_id(job_id: str, cell: str) -> str:
    """A run is one cell of one job: `<job_id>/<cell>`."""
    return f"{job_id}/{cell}"


def apply_events(con: duckdb.DuckDBPyConnection, job: JobRef, events: Iterable[ev.Event]) -> None:
    """Write `events` of one job inside the caller's transaction, in a few bulk statements."""
    apply_batch(con, [(job, events)])


def apply_batch(con: duckdb.DuckDBPyConnection, batch: Iterable[tuple[JobRef, Iterable[ev.Event]]]) -> None:
    """Write the events of several jobs inside the caller's transaction, with one bulk statement per
    table for all of them: a DuckDB statement costs milliseconds whatever its size, so an orchestrator
    that wrote each job's lines apart paid that for every running job on every tick."""
    logged: dict[Any, tuple] = {}
    inits: dict[Any, tuple] = {}
    epochs: dict[Any, tuple] = {}
    vals: dict[Any, tuple] = {}
    metrics: dict[Any, tuple] = {}
    finals: dict[str, tuple] = {}  # run_id -> values; a replayed event keeps its last version
    norms: dict[str, tuple] = {}
    starts: dict[str, tuple] = {}  # job_id -> (device, threads)
    last_epochs: dict[str, int] = {}
    for job, events in batch:
        for e in events:
            ts = datetime.fromtimestamp(e.ts, tz=UTC).replace(tzinfo=None)
            logged[(job.job_id, e.key)] = (job.job_id, e.key, str(e.KIND), ev.payload(e), ts)
            if isinstance(e, ev.Start):
                starts[job.job_id] = (e.device, e.threads)
            elif isinstance(e, ev.Init):
                rid = run_id(job.job_id, e.cell)
                inits[rid] = (
                    rid,
                    job.job_id,
                    job.study_id,
                    job.kind,
                    job.seed,
                    e.arm,
                    e.geometry,
                    e.loss,
                    e.tau,
                    e.trainable_params,
                    e.init_sha256,
                    e.objective_params,
                )
            elif isinstance(e, ev.Epoch):
                rid = run_id(job.job_id, e.cell)
                epochs[(rid, e.epoch)] = (rid, e.epoch, _finite(e.train_loss), e.updates, e.batch_sha256, e.seconds)
                last_epochs[job.job_id] = max(last_epochs.get(job.job_id, 0), e.epoch)
            elif isinstance(e, ev.Validation):
                rid = run_id(job.job_id, e.cell)
                for level, values in e.metrics.items():
                    for metric, value in values.items():
                        key = (rid, e.epoch, e.aggregation, level, metric)
                        vals[key] = (*key, _finite(value))
            elif isinstance(e, ev.Final):
                finals[run_id(job.job_id, e.cell)] = (
                    e.final_sha256,
                    e.updates,
                    e.reload_max_diff,
                    e.best_epoch,
                    _finite(e.best_score),
                )
            elif isinstance(e, ev.TestMetrics) and not isinstance(e, ev.Reconcile):
                # A reconciliation is kept in the event log only: it must never replace the stored endpoint.
                for level, values in e.metrics.items():
                    for metric, value in values.items():
                        key = (e.run_id, e.perturbation, e.aggregation, level, metric)
                        metrics[key] = (
                            job.study_id,
                            e.run_id,
                            e.seed,
                            e.arm,
                            e.perturbation,
                            e.aggregation,
                            level,
                            metric,
                            _finite(value),
                            e.posthoc,
                        )
            elif isinstance(e, ev.Norms):
                norms[e.run_id] = (e.max_norm, e.radius, e.bound)
    _upsert(con, "events", _EVENT_COLUMNS, logged)
    _upsert(con, "runs", _RUN_COLUMNS, inits)
    _upsert(con, "epochs", _EPOCH_COLUMNS, epochs)
    _upsert(con, "val_metrics", _VAL_COLUMNS, vals)
    _upsert(con, "metrics", _METRIC_COLUMNS, metrics)
    update_rows(con, "jobs", "job_id", ("device", "threads"), [(j, *v) for j, v in starts.items()])
    update_rows(
        con, "jobs", "job_id", ("epochs_done",), list(last_epochs.items()), "{c} = greatest(jobs.{c}, u.{c})"
    )
    update_rows(con, "runs", "run_id", _FINAL_COLUMNS, [(r, *v) for r, v in finals.items()])
    update_rows(con, "runs", "run_id", _NORM_COLUMNS, [(r, *v) for r, v in norms.items()])


def update_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    key: str,
    columns: tuple[str, ...],
    rows: list[tuple],
    assign: str = "{c} = u.{c}",
) -> None:
    """Set `columns` of many rows of `table`, keyed by `key`, in one UPDATE ... FROM a registered frame:
    one statement per row (executemany) costs a few ms each, which every job's finals, norms and start,
    and every tick's heartbeats, paid per row. ``rows`` are (key, *columns); `assign` says how each
    column is set from the incoming row `u`, e.g. "{c} = greatest(jobs.{c}, u.{c})"."""
    if not rows:
        return
    name = f"_incoming_{table}_updates"
    frame = pl.DataFrame(rows, schema=[key, *columns], orient="row", infer_schema_length=None)
    con.register(name, frame)
    try:
        sets = ", ".join(assign.format(c=c) for c in columns)
        con.execute(f"UPDATE {table} SET {sets} FROM {name} u WHERE {table}.{key} = u.{key}")
    finally:
        con.unregister(name)


_FINAL_COLUMNS = ("final_sha256", "updates", "reload_max_diff", "best_epoch", "best_score")
_NORM_COLUMNS = ("max_norm", "ball_radius", "norm_bound")


