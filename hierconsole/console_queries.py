"""Read queries behind the console's views: job progress, loss curves, event logs, live effects and audits.

Domain code like the rest of the package (no Textual here), so any front end can show the same numbers.
Everything scientific is delegated: per-seed tables come from `analysis_store`, checks from `audit`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from hierconsole.analysis_store import metrics_long, registered_aggregation
from hierconsole.audit import CHECKS, Check, stored_audits
from hierconsole.effects import ARMS, per_seed_from_long
from hierconsole.errors import HierconsoleError
from hierconsole.storage import Store
from hierconsole.taxonomy import Taxonomy

RESUMABLE_STATES = ("crashed", "cancelled", "failed")


@dataclass(frozen=True)
class JobRow:
    """One job as the queue view shows it."""

    job_id: str
    study_id: str
    kind: str
    seed: int
    tau: float | None
    state: str
    done: int
    """Epochs trained (tuning and final jobs) or (run, perturbation) pairs scored (evaluation jobs)."""
    total: int
    attempts: int
    error: str | None
    losses: dict[str, float] = field(default_factory=dict)
    """Latest training loss per cell (arm)."""
    epoch_seconds: float | None = None
    """Mean wall time of one lockstep epoch so far."""

    @property
    def short_id(self) -> str:
        return self.job_id.split("/", 1)[1]

    @property
    def eta_seconds(self) -> float | None:
        if self.state != "running" or self.epoch_seconds is None or self.kind not in ("tune", "final"):
            return None
        return max(self.total - self.done, 0) * self.epoch_seconds

    @property
    def resumable(self) -> bool:
        return self.state in RESUMABLE_STATES


_JOBS_SQL = """
WITH latest AS (
    SELECT r.job_id, map(list(r.arm ORDER BY r.arm), list(e.train_loss ORDER BY r.arm)) AS losses
    FROM runs r JOIN epochs e USING (run_id)
    WHERE (e.run_id, e.epoch) IN (SELECT (run_id, max(epoch)) FROM epochs GROUP BY run_id)
    GROUP BY r.job_id
), timing AS (
    SELECT r.job_id, avg(e.seconds) AS epoch_seconds
    FROM runs r JOIN epochs e USING (run_id) GROUP BY r.job_id
), scored AS (
    SELECT job_id, count(*) AS n FROM events WHERE kind IN ('metrics', 'reconcile') GROUP BY job_id
), cells AS (
    SELECT study_id, count(*) AS n FROM runs WHERE kind = 'final' GROUP BY study_id
), perturbations AS (
    SELECT study_id, count(*) AS n FROM splits WHERE role LIKE 'qg:%' GROUP BY study_id
)
SELECT j.job_id, j.study_id, j.kind, j.seed, j.tau, j.state, j.epochs_done, j.epochs_total, j.attempts,
       j.error, t.epoch_seconds, coalesce(s.n, 0) AS scored,
       coalesce(c.n, 0) * coalesce(p.n, 0) AS to_score, l.losses
FROM jobs j
LEFT JOIN latest l USING (job_id)
LEFT JOIN timing t USING (job_id)
LEFT JOIN scored s USING (job_id)
LEFT JOIN cells c ON c.study_id = j.study_id
LEFT JOIN perturbations p ON p.study_id = j.study_id
{where}
ORDER BY j.created_at, CASE j.kind WHEN 'tune' THEN 0 WHEN 'final' THEN 1 ELSE 2 END, j.seed, j.tau, j.job_id
"""


def job_rows(store: Store, study_id: str | None = None) -> list[JobRow]:
    """Every job (of one study, or of the store) with its progress, latest cell losses and epoch time."""
    where, params = ("WHERE j.study_id = ?", [study_id]) if study_id else ("", [])
    out = []
    for r in store.dicts(_JOBS_SQL.format(where=where), params):
        scoring = r["kind"] in ("evaluate", "rescore")
        losses = dict(r["losses"] or {})
        out.append(
            JobRow(
                job_id=r["job_id"],
                study_id=r["study_id"],
                kind=r["kind"],
                seed=r["seed"],
                tau=r["tau"],
                state=r["state"],
                done=r["scored"] if scoring else r["epochs_done"],
                total=r["to_score"] if scoring else r["epochs_total"],
                attempts=r["attempts"],
                error=r["error"],
                losses={arm: losses[arm] for arm in ARMS if arm in losses}
                | {k: v for k, v in losses.items() if k not in ARMS},
                epoch_seconds=r["epoch_seconds"],
            )
        )
    return out


def has_data(store: Store) -> bool:
    """Whether the store holds any dataset or study (a first launch has neither)."""
    return bool(store.one("SELECT (SELECT count(*) FROM datasets) + (SELECT count(*) FROM studies)")[0])


def loss_curves(store: Store, job_id: str) -> dict[str, list[tuple[int, float]]]:
    """Training loss per epoch of each cell of a job, cells in arm order."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for arm, epoch, loss in store.rows(
        "SELECT r.arm, e.epoch, e.train_loss FROM runs r JOIN epochs e USING (run_id) "
        "WHERE r.job_id = ? ORDER BY r.arm, e.epoch",
        [job_id],
    ):
        curves.setdefault(arm, []).append((epoch, loss))
    order = {arm: i for i, arm in enumerate(ARMS)}
    return dict(sorted(curves.items(), key=lambda kv: (order.get(kv[0], len(ARMS)), kv[0])))


@dataclass(frozen=True)
class EventRow:
    kind: str
    seconds: float
    """Seconds since the job's first stored event, so logs read the same in every time zone."""
    payload: dict[str, Any]


def job_events(store: Store, job_id: str, limit: int = 400) -> list[EventRow]:
    """The latest `limit` stored events of a job, oldest first."""
    rows = store.rows(
        "SELECT kind, epoch(ts) AS t, payload FROM events WHERE job_id = ? ORDER BY ts DESC, key DESC LIMIT ?",
        [job_id, limit],
    )
    first = store.one("SELECT epoch(min(ts)) FROM events WHERE job_id = ?", [job_id])
    t0 = first[0] if first and first[0] is not None else 0.0
    return [EventRow(kind, float(t) - float(t0), json.loads(p)) for kind, t, p in reversed(rows)]


def evaluated_per_seed(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame | None:
    """The per-seed table restricted to seeds whose four arms are scored on every Q/G perturbation.

    While an evaluation runs, metrics arrive seed by seed; a half-scored seed would break the pairing of
    arms, so it is left out until complete. None while no seed is complete.
    """
    long = metrics_long(store, study_id, aggregation or registered_aggregation(store, study_id))
    if long.is_empty():
        return None
    n_perturbations = store.one(
        "SELECT count(*) FROM splits WHERE study_id = ? AND role LIKE 'qg:%'", [study_id]
    )[0]
    complete = (
        long.group_by("seed")
        .agg(pl.struct("arm", "perturbation").n_unique().alias("cells"))
        .filter(pl.col("cells") == len(ARMS) * n_perturbations)["seed"]
    )
    long = long.filter(pl.col("seed").is_in(complete.implode()))
    if long.is_empty():
        return None
    return per_seed_from_long(long, source=f"study {study_id}")


@dataclass(frozen=True)
class StudyProgress:
    study_id: str
    name: str
    dataset_id: str
    phase: str
    seeds: int
    seeds_trained: int
    active_jobs: int
    posthoc: dict[str, bool]
    """aggregation -> whether its metrics are a post-hoc re-score (the registered one is not)."""


def study_progress(store: Store, study_id: str) -> StudyProgress:
    row = store.dicts(
        "SELECT s.study_id, s.name, s.dataset_id, s.phase, "
        "count(j.job_id) FILTER (WHERE j.kind = 'final') AS seeds, "
        "count(j.job_id) FILTER (WHERE j.kind = 'final' AND j.state = 'finished') AS seeds_trained, "
        "count(j.job_id) FILTER (WHERE j.state IN ('queued', 'running')) AS active_jobs "
        "FROM studies s LEFT JOIN jobs j USING (study_id) WHERE s.study_id = ? GROUP BY ALL",
        [study_id],
    )
    if not row:
        raise HierconsoleError(f"no study {study_id!r} in the store")
    r = row[0]
    posthoc = dict(
        store.rows(
            "SELECT aggregation, bool_or(posthoc) FROM metrics WHERE study_id = ? GROUP BY aggregation",
            [study_id],
        )
    )
    return StudyProgress(
        study_id=r["study_id"],
        name=r["name"],
        dataset_id=r["dataset_id"],
        phase=r["phase"],
        seeds=r["seeds"],
        seeds_trained=r["seeds_trained"],
        active_jobs=r["active_jobs"],
        posthoc=posthoc,
    )


def current_audits(store: Store, study_id: str) -> tuple[list[Check], bool]:
    """The recorded checks of a study, or, before they are recorded, each check evaluated now.

    Returns (checks, recorded). Evaluating writes nothing: the record is the study's own, made when it
    completes (`hierconsole audit --recheck` refreshes it).
    """
    recorded = stored_audits(store, study_id)
    if recorded:
        return recorded, True
    return [check(store, study_id) for check in CHECKS], False


def failed_audit_counts(store: Store) -> dict[str, int]:
    """study id -> number of recorded checks that failed (studies without failures are absent)."""
    return dict(
        store.rows("SELECT study_id, count(*) FROM audits WHERE ok = false GROUP BY study_id ORDER BY 1")
    )


def taxonomy_lines(store: Store, dataset_id: str) -> list[str]:
    """The taxonomy summary of a registered dataset, rebuilt from its stored (leaf, middle, high) rows."""
    names = store.one("SELECT level_names FROM datasets WHERE dataset_id = ?", [dataset_id])
    rows = store.rows(
        "SELECT leaf, middle, high FROM taxonomy_nodes WHERE dataset_id = ? ORDER BY leaf_index", [dataset_id]
    )
    if names is None or not rows:
        raise HierconsoleError(f"dataset {dataset_id!r} has no stored taxonomy")
    tax = Taxonomy.from_rows(rows, level_names=tuple(names[0]), source=f"dataset {dataset_id}")
    return tax.summary().lines()


def preset_parallelism(store: Store, study_id: str) -> int:
    """The number of worker processes a study's preset asks for."""
    row = store.one("SELECT preset FROM studies WHERE study_id = ?", [study_id])
    if row is None:
        return 1
    return int(json.loads(row[0]).get("compute", {}).get("max_parallel_jobs", 1))
