"""Jobs as the front ends show them: state, progress, cells, latest losses, curves and event logs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.factorial import cells_in_order
from hierconsole.locations import job_dir
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import kind_order, sql_list
from hierconsole.vocabulary import (
    ACTIVE_STATES,
    ORPHANED,
    RESUMABLE_STATES,
    SCORING_KINDS,
    STOPPED,
    TRAINING_KINDS,
    UNTRAINED_BASELINES,
    Executor,
    JobKind,
    JobState,
    Phase,
)


@dataclass(frozen=True)
class JobRow:
    """One job as the queue views (the console's runs view, `hierconsole runs`) show it."""

    job_id: str
    study_id: str
    kind: JobKind
    seed: int
    tau: float | None
    state: JobState
    done: int
    """Epochs trained (tuning and final jobs) or (run, perturbation) pairs scored (scoring jobs)."""
    total: int
    attempts: int
    error: str | None
    losses: dict[str, float] = field(default_factory=dict)
    """Latest training loss per cell (arm), in arm order."""
    epoch_seconds: float | None = None
    """Mean wall time of one lockstep epoch so far."""
    cells: tuple[tuple[str, float | None], ...] = ()
    """(arm, SupCon temperature) of each cell the job trains, by arm name."""
    orphaned: bool = False
    """Stored as running, but no orchestrator holds the store (see `vocabulary.ORPHANED`)."""
    stopped: bool = False
    """Orphaned because its orchestrator stopped the worker without the store (`vocabulary.STOPPED`)."""
    executor: Executor | None = None
    """Where its last attempt was launched (None: never launched)."""
    node: str | None = None
    """The node of that attempt: "local", or a Ray node's host and id."""

    @property
    def where(self) -> str:
        """`local`, `ray HOST NODE-ID` (or `ray (waiting)` before Ray placed it); empty if never launched."""
        if self.executor is None:
            return ""
        if self.executor == Executor.LOCAL:
            return "local"
        return f"ray {self.node}" if self.node else "ray"

    @property
    def shown_state(self) -> str:
        """The state to show: `stopped` for a running job its orchestrator stopped without the store,
        `orphaned` for another running job nobody orchestrates."""
        return STOPPED if self.stopped else ORPHANED if self.orphaned else self.state

    @property
    def short_id(self) -> str:
        return self.job_id.split("/", 1)[1]

    @property
    def eta_seconds(self) -> float | None:
        if self.state != JobState.RUNNING or self.epoch_seconds is None or self.kind not in TRAINING_KINDS:
            return None
        return max(self.total - self.done, 0) * self.epoch_seconds

    @property
    def resumable(self) -> bool:
        return self.state in RESUMABLE_STATES

    @property
    def cells_text(self) -> str:
        """`E_R E_S@0.2 H_R H_S@0.2`: each cell, with its temperature where it has one."""
        return " ".join(arm + ("" if tau is None else f"@{tau:g}") for arm, tau in self.cells)


# {runs}, {scoring_jobs}, {splits} and {studies} narrow each CTE to the study asked for (or to nothing); without
# them every CTE scanned the whole store's epochs and events, which the queue's 0.2 s refresh repeats.
_JOBS_SQL = """
WITH scoped_runs AS (
    SELECT run_id, job_id, study_id, kind, arm, tau FROM runs {runs}
), last_epoch AS (
    SELECT e.run_id, max(e.epoch) AS epoch FROM epochs e JOIN scoped_runs r USING (run_id) GROUP BY e.run_id
), latest AS (
    SELECT r.job_id, map(list(r.arm ORDER BY r.arm), list(e.train_loss ORDER BY r.arm)) AS losses
    FROM scoped_runs r JOIN last_epoch m USING (run_id) JOIN epochs e ON e.run_id = m.run_id AND e.epoch = m.epoch
    GROUP BY r.job_id
), timing AS (
    SELECT r.job_id, avg(e.seconds) AS epoch_seconds
    FROM scoped_runs r JOIN epochs e USING (run_id) GROUP BY r.job_id
), scored AS (
    SELECT job_id, count(*) AS n FROM events
    WHERE kind IN ({scored_kinds}) AND job_id IN (SELECT job_id FROM jobs WHERE kind IN ({scoring}) {scoring_jobs})
    GROUP BY job_id
), cells AS (
    SELECT study_id, count(*) AS n FROM scoped_runs WHERE kind = '{final}' GROUP BY study_id
), job_cells AS (
    SELECT job_id, list((arm, tau) ORDER BY arm) AS cells FROM scoped_runs GROUP BY job_id
), perturbations AS (
    SELECT study_id, count(*) AS n FROM splits WHERE {qg_roles} {splits} GROUP BY study_id
), baselines AS (
    -- A scoring job also scores the study's untrained baseline arms on every perturbation (a trained
    -- one, HIER-style, is a final cell and counted with them).
    SELECT study_id,
           coalesce(len(list_filter(from_json(json_extract(preset, '$.evaluation.baselines'), '["VARCHAR"]'),
                                    lambda b: b IN ({untrained}))), 0) AS n
    FROM studies {studies}
)
SELECT j.job_id, j.study_id, j.kind, j.seed, j.tau, j.state, j.epochs_done, j.epochs_total, j.attempts,
       j.error, t.epoch_seconds, coalesce(s.n, 0) AS scored,
       (coalesce(c.n, 0) + coalesce(b.n, 0)) * coalesce(p.n, 0) AS to_score, l.losses, jc.cells,
       j.executor, j.node
FROM jobs j
LEFT JOIN latest l USING (job_id)
LEFT JOIN timing t USING (job_id)
LEFT JOIN scored s USING (job_id)
LEFT JOIN job_cells jc USING (job_id)
LEFT JOIN cells c ON c.study_id = j.study_id
LEFT JOIN perturbations p ON p.study_id = j.study_id
LEFT JOIN baselines b ON b.study_id = j.study_id
{where}
ORDER BY j.created_at, {kind_order}, j.seed, j.tau, j.job_id
"""


def job_rows(store: Store, study_id: str | None = None) -> list[JobRow]:
    """Every job (of one study, or of the store) with its progress, cells, latest losses and epoch time."""
    from hierconsole.study.db import split_files  # numpy: not on the console's way to its first frame

    one = study_id is not None
    sql = _JOBS_SQL.format(
        runs="WHERE study_id = ?" if one else "",
        scoring_jobs="AND study_id = ?" if one else "",
        splits="AND study_id = ?" if one else "",
        studies="WHERE study_id = ?" if one else "",
        where="WHERE j.study_id = ?" if one else "",
        scored_kinds=sql_list([ev.EventKind.METRICS, ev.EventKind.RECONCILE]),
        scoring=sql_list(sorted(SCORING_KINDS)),
        final=JobKind.FINAL,
        untrained=sql_list(UNTRAINED_BASELINES),
        qg_roles=split_files.QG_ROLES_SQL,
        kind_order=kind_order("j.kind"),
    )
    params = [study_id] * 5 if one else []
    out = []
    for r in store.dicts(sql, params):
        kind = JobKind(r["kind"])
        scoring = kind in SCORING_KINDS
        losses = dict(r["losses"] or {})
        cells = cells_in_order(losses)  # the cells in the factorial's order, then any other loss (hier)
        losses = {arm: losses[arm] for arm in cells} | {k: v for k, v in losses.items() if k not in cells}
        orphaned = r["state"] == JobState.RUNNING and not store.held
        stopped = False
        if orphaned:
            # Why its orchestrator stopped it (e.g. the store could not be written), if it said.
            note = job_dir(store.home, r["job_id"]) / layout.STOPPED
            stopped = note.exists()
            if stopped and r["error"] is None:
                r["error"] = note.read_text(errors="replace").strip()
        out.append(
            JobRow(
                job_id=r["job_id"],
                study_id=r["study_id"],
                kind=kind,
                seed=r["seed"],
                tau=r["tau"],
                state=JobState(r["state"]),
                done=r["scored"] if scoring else r["epochs_done"],
                total=r["to_score"] if scoring else r["epochs_total"],
                attempts=r["attempts"],
                error=r["error"],
                losses=losses,
                epoch_seconds=r["epoch_seconds"],
                cells=tuple((arm, None if tau is None else float(tau)) for arm, tau in r["cells"] or ()),
                orphaned=orphaned,
                stopped=stopped,
                executor=None if r["executor"] is None else Executor(r["executor"]),
                node=r["node"],
            )
        )
    return out


def loss_curves(store: Store, job_id: str) -> dict[str, list[tuple[int, float]]]:
    """Training loss per epoch of each cell of a job, cells in arm order."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for arm, epoch, loss in store.rows(
        "SELECT r.arm, e.epoch, e.train_loss FROM runs r JOIN epochs e USING (run_id) "
        "WHERE r.job_id = ? ORDER BY r.arm, e.epoch",
        [job_id],
    ):
        curves.setdefault(arm, []).append((epoch, loss))
    order = {arm: i for i, arm in enumerate(cells_in_order(curves))}
    return dict(sorted(curves.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


@dataclass(frozen=True)
class EventRow:
    event: ev.Event
    seconds: float
    """Seconds since the job's first stored event, so logs read the same in every time zone."""
    number: int = 0
    """1 for the job's first stored event, 2 for the next, ...: where a log that shows some left off."""

    @property
    def kind(self) -> ev.EventKind:
        return self.event.KIND


def job_events(store: Store, job_id: str, limit: int = 400, after: int = 0) -> list[EventRow]:
    """The job's stored events numbered after `after` (the newest `limit` of them), oldest first, parsed
    through the event schema. A log passes the last number it shows as `after` to get only what is new."""
    rows = store.rows(
        "SELECT * FROM (SELECT row_number() OVER (ORDER BY ts, key) AS n, kind, epoch(ts) AS t, payload "
        "FROM events WHERE job_id = ?) WHERE n > ? ORDER BY n DESC LIMIT ?",
        [job_id, after, limit],
    )
    first = store.one("SELECT epoch(min(ts)) FROM events WHERE job_id = ?", [job_id])
    t0 = first[0] if first and first[0] is not None else 0.0
    out = []
    for n, kind, t, payload in reversed(rows):
        try:
            event = ev.from_payload(kind, json.loads(payload), ts=float(t))
        except ev.MalformedEvent:
            continue  # stored by ingest, so parsed once already; a row of an unknown kind is skipped
        out.append(EventRow(event, float(t) - float(t0), int(n)))
    return out


# -- what `resume` and `cancel` act on -------------------------------------------------------------------


def _only(study_id: str | None) -> tuple[str, list[str]]:
    return ("AND study_id = ?", [study_id]) if study_id else ("", [])


def job_threads(store: Store) -> int:
    """The most CPU threads any stored job was given (1 for an empty store): what a resume runs with."""
    return int(store.value("SELECT coalesce(max(threads), 1) FROM jobs"))


def _jobs_in(store: Store, states: tuple[str, ...], study_id: str | None) -> list[tuple[str, str]]:
    where, params = _only(study_id)
    sql = f"SELECT job_id, study_id FROM jobs WHERE state IN ({sql_list(states)}) {where} ORDER BY job_id"
    return [(str(j), str(s)) for j, s in store.rows(sql, params)]


def resumable_jobs(store: Store, study_id: str | None = None) -> list[tuple[str, str]]:
    """(job_id, study_id) of the jobs a resume puts back in the queue (RESUMABLE_STATES), of one study or all."""
    return _jobs_in(store, RESUMABLE_STATES, study_id)


def active_jobs(store: Store, study_id: str | None = None) -> list[tuple[str, str]]:
    """(job_id, study_id) of the queued and running jobs (ACTIVE_STATES), of one study or all."""
    return _jobs_in(store, ACTIVE_STATES, study_id)


def unfinished_studies(store: Store, study_id: str | None = None) -> list[str]:
    """The studies whose phase is not complete (one may have a phase to catch up on), of one study or all."""
    where, params = _only(study_id)
    return [
        str(r[0])
        for r in store.rows(
            f"SELECT study_id FROM studies WHERE phase <> ? {where} ORDER BY study_id", [Phase.COMPLETE, *params]
        )
    ]
