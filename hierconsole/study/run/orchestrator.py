"""The orchestrator: queued jobs become worker processes; their events become store rows.

An executor (`executors`) starts each worker: a local subprocess, or a task on a Ray cluster whose
events and files are brought into the job folder. Workers never open the store; their typed events end
up in their folder's events.jsonl either way. The orchestrator tails those files, writes the events
through the store's single writer, decides each job's end state from its last event and exit, and
advances studies. A worker outlives an orchestrator that dies: the next orchestrator adopts it if it
still runs, or marks it crashed (PID gone, or reused by another process; Ray worker gone) so it can be
resumed from its last checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.contract.liveness import job_lock_held, job_lock_holder, pid_alive, process_start_time
from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.locations import job_dir
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import kind_order, sql_list
from hierconsole.study.executors import Handle, JobExecutor
from hierconsole.study.executors.local import WORKER_MODULE, LocalExecutor, LocalHandle
from hierconsole.study.run.ingest import JobRef, apply_batch, apply_events, update_rows
from hierconsole.study.run.lifecycle import advance
from hierconsole.vocabulary import (
    ACTIVE_STATES,
    RESUMABLE_STATES,
    TRAINING_KINDS,
    Executor,
    JobKind,
    JobState,
)

__all__ = ["WORKER_MODULE", "Orchestrator"]

CANCEL_GRACE_SECONDS = 10.0
LAUNCH_FAULT_ENV = "HIERCONSOLE_FAULT_KILL_AFTER_LAUNCH"
"""Set (the crash tests): the orchestrator SIGKILLs itself right after starting a worker, before the store
records the launch (as a kill of `run` or `replicate` can land)."""
STALE_HEARTBEAT_SECONDS = 120.0

log = logging.getLogger("hierconsole.orchestrator")

EventsCallback = Callable[[str, list[ev.Event]], None]
ProblemCallback = Callable[[str, ev.LineProblem], None]


@dataclass
class Active:
    job: JobRef
    folder: Path
    handle: Handle
    owner: JobExecutor
    """The executor that launched (or adopted) it: its capacity counts this job."""
    offset: int = 0
    lines: int = 0
    cancel_requested_at: float | None = None
    stale: bool = False
    heartbeat_seen: float = 0.0
    """The newest heartbeat-file time counted for this worker (a time.time()). A launch sets it to the
    launch's time: the file a dead predecessor left behind is older, and is not this worker's beat."""
    last_events: list[ev.Event] = field(default_factory=list)

    started: bool = False
    """Its worker has reported its start (its imports are done)."""
    shown_node: str = ""
    """The node last written to the job's row (a Ray job learns its node once it is placed)."""

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def gpu(self) -> str | None:
        return self.handle.gpu


def _report(job_id: str, problem: ev.LineProblem) -> None:
    log.warning("job %s: %s", job_id, problem)


class Orchestrator:
    """Drives jobs of one store. Call `tick()` periodically (the CLI loops; the TUI uses a timer thread)."""

    def __init__(
        self,
        store: Store,
        *,
        max_parallel: int | None = None,
        python: str | None = None,
        on_events: EventsCallback | None = None,
        on_problem: ProblemCallback = _report,
        gpus: list[str] | None = None,
        stale_after: float = STALE_HEARTBEAT_SECONDS,
        studies: list[str] | None = None,
        executor: JobExecutor | None = None,
        connect_ray: Callable[[str], JobExecutor] | None = None,
        warm: bool = True,
    ):
        self.stale_after = stale_after
        self.studies = list(studies) if studies is not None else None
        """Launch only these studies' queued jobs (None: every study's)."""
        self.store = store
        self.max_parallel = max_parallel
        self.gpus = list(gpus or [])
        self.python = python or sys.executable
        self.local = LocalExecutor(store.home, python=self.python, gpus=self.gpus, warm=warm)
        self.executor: JobExecutor = executor or self.local
        """What launches queued jobs, unless a study was handed to another (`assign`)."""
        self.assigned: dict[str, JobExecutor] = {}
        """study id -> the executor its queued jobs launch on (the console launches each study its way)."""
        self.connect_ray = connect_ray
        """How to reach a Ray cluster named in a job folder (`executors.ray_cluster.connect`), to adopt a
        Ray job an earlier orchestrator left running; None: import it when such a job is found."""
        self.on_events = on_events
        self.on_problem = on_problem
        """Told of every events-file line that was skipped (malformed, torn, from a newer version)."""
        self.active: dict[str, Active] = {}
        self.extra_executors: list[JobExecutor] = []
        """Executors connected only to adopt jobs found running (closed with the others)."""
        self.recover()

    # -- start-up -----------------------------------------------------------------------------------
    def _job(self, job_id: str) -> JobRef:
        row = self.store.one("SELECT job_id, study_id, kind, seed FROM jobs WHERE job_id = ?", [job_id])
        if row is None:
            raise NotFoundError(f"no job {job_id!r}")
        return JobRef(row[0], row[1], JobKind(row[2]), row[3])

    def recover(self) -> list[str]:
        """Settle jobs left "running" by an earlier orchestrator. Returns the ids marked crashed.

        Each such job's events are replayed first (whatever the dead orchestrator had not ingested). A
        live worker is adopted; a worker that ended on its own is given the state its last event says
        (and its study moves on); one that vanished without a final event is marked crashed. Jobs in
        other states were fully ingested when they ended, so start-up stays fast on a large store.
        """
        crashed = []
        for job_id, pid, pid_start, executor in self.store.rows(
            "SELECT job_id, pid, pid_start, executor FROM jobs WHERE state = ?", [JobState.RUNNING]
        ):
            job = self._job(job_id)
            folder = job_dir(self.store.home, job_id)
            remote: tuple[Handle, JobExecutor] | str | None = None
            if executor == Executor.RAY:
                # What the Ray worker sent since the last orchestrator stopped is brought in first, so
                # the replay below ingests it too.
                remote = self._adopt_ray(job_id, folder)
                if not isinstance(remote, str):
                    remote[0].pump()
            read = self._replay(job)
            if remote is not None:
                if not isinstance(remote, str):
                    handle, owner = remote
                    (folder / layout.STOPPED).unlink(missing_ok=True)
                    self.active[job_id] = Active(
                        job, folder, handle, owner, offset=read.offset, lines=read.lines, shown_node=handle.node,
                        started=True,  # adopted: running for a while already
                    )
                    continue
                alive, reason = False, remote
            else:
                # The worker must be alive *and* hold this folder's lock: in a copied or moved home the PID
                # may be the original home's live worker, which writes elsewhere and is not ours to adopt.
                alive = bool(pid) and pid_alive(pid, pid_start)
                reason = (
                    f"worker PID {pid} runs, but not for this job folder (a copied or moved home?); "
                    f"resume it here with `hierconsole resume`"
                    if alive
                    else f"worker PID {pid} is gone (orchestrator restarted); resume it with `hierconsole resume`"
                )
                if alive and job_lock_held(folder):
                    (folder / layout.STOPPED).unlink(missing_ok=True)  # driven again: an old reason is stale
                    handle = LocalHandle(pid, pid_start)
                    self.active[job_id] = Active(
                        job, folder, handle, self.local, offset=read.offset, lines=read.lines, shown_node=handle.node,
                        started=True,  # adopted: running for a while already
                    )
                    continue
            state, error = _outcome(read.events, cancel_requested=False)
            if state == JobState.CRASHED:
                error = reason
                crashed.append(job_id)
            stopped = job_dir(self.store.home, job_id) / layout.STOPPED
            if state != JobState.FINISHED and stopped.exists():
                error = stopped.read_text(errors="replace").strip() or error
            self._set_state(job_id, state, error)
            stopped.unlink(missing_ok=True)
            if state == JobState.FINISHED:
                advance(self.store, job.study_id)
        return crashed

    def _adopt_ray(self, job_id: str, folder: Path) -> tuple[Handle, JobExecutor] | str:
        """The live Ray attempt of a job an earlier orchestrator launched, or why it cannot be adopted."""
        try:
            info = json.loads((folder / layout.EXECUTOR).read_text())
            address = str(info["address"])
            started_by = info.get("started_by")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return f"it ran on Ray, but {folder / layout.EXECUTOR} cannot be read ({exc}); resume it"
        if started_by and started_by[0] != os.getpid():
            # A Ray instance that an orchestrator started for itself ended with that orchestrator.
            return (
                f"it ran on the local Ray instance of hierconsole PID {started_by[0]}, which ended with it; "
                f"resume it with `hierconsole resume`"
            )
        try:
            executor = self.ray_executor(address)
        except HierconsoleError as exc:
            return f"it runs on the Ray cluster at {address}, which cannot be reached from here ({exc})"
        adopt = getattr(executor, "adopt", None)
        if adopt is None:
            return f"it runs on the Ray cluster at {address}; adopt it with `--executor ray`"
        found: Handle | str = adopt(job_id, folder, info)
        return found if isinstance(found, str) else (found, executor)

    def ray_executor(self, address: str) -> JobExecutor:
        """The Ray executor of the cluster at `address`: one this orchestrator has, or a new connection
        (a process connects to one Ray cluster at most: Ray refuses a second)."""
        for candidate in (self.executor, *self.assigned.values()):
            if candidate.kind == Executor.RAY and getattr(candidate, "reaches", lambda _a: False)(address):
                return candidate
        connect_ray = self.connect_ray
        if connect_ray is None:
            from hierconsole.study.executors.ray_cluster import connect  # only where a Ray job is found

            def connect_ray(a: str) -> JobExecutor:
                return connect(self.store.home, a)

        executor = connect_ray(address)
        self.extra_executors.append(executor)
        return executor

    def assign(self, study_ids: list[str], executor: JobExecutor) -> None:
        """Launch these studies' queued jobs on `executor` (the console's launch dialog chooses one)."""
        for study_id in study_ids:
            self.assigned[study_id] = executor

    def close_executors(self) -> None:
        """End what the executors hold (a Ray instance started here); running Ray jobs on it end too."""
        seen: set[int] = set()
        for executor in (self.executor, *self.assigned.values(), *self.extra_executors):
            if id(executor) not in seen:
                seen.add(id(executor))
                executor.close()

    def replay(self, job_id: str) -> list[ev.Event]:
        """Write a job's whole events.jsonl again (idempotent); returns its events."""
        return self._replay(self._job(job_id)).events

    def _replay(self, job: JobRef) -> ev.EventsRead:
        read = ev.read_events(job_dir(self.store.home, job.job_id) / layout.EVENTS)
        for problem in read.problems:
            self.on_problem(job.job_id, problem)
        if read.events:
            self._write_events(job, read.events)
        return read

    # -- the loop -----------------------------------------------------------------------------------
    def tick(self) -> None:
        self._ingest_running()
        for job_id in list(self.active):
            self._poll(self.active[job_id])
        waiting = self._launch_queued()
        self._keep_warm(waiting)

    def busy(self, study_ids: list[str] | None = None) -> bool:
        sql = f"SELECT count(*) FROM jobs WHERE state IN ({sql_list(ACTIVE_STATES)})"
        params: list[Any] = []
        if study_ids:
            sql += " AND study_id IN (SELECT unnest(?))"
            params.append(study_ids)
            if any(a.job.study_id in study_ids for a in self.active.values()):
                return True
        elif self.active:
            return True
        return self.store.value(sql, params) > 0

    def run_until_idle(
        self,
        study_ids: list[str] | None = None,
        *,
        interval: float = 0.25,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        while True:
            self.tick()
            if on_tick:
                on_tick()
            if not self.busy(study_ids):
                break
            time.sleep(interval)
        if not self.active:
            self.local.warm(False)

    # -- launching ----------------------------------------------------------------------------------
    def _executor_of(self, study_id: str) -> JobExecutor:
        return self.assigned.get(study_id, self.executor)

    def _launch_queued(self) -> list[str]:
        """Launch what the executors have room for; returns the study ids of the jobs left queued."""
        only, params = ("", [])
        if self.studies is not None:
            only, params = ("AND study_id IN (SELECT unnest(?))", [self.studies])
        queued = self.store.rows(
            f"SELECT job_id, study_id FROM jobs WHERE state = ? {only} "
            f"ORDER BY {kind_order('kind')}, created_at, seed, tau, job_id",
            [JobState.QUEUED, *params],
        )
        # Each executor has its own capacity: a full one holds back its own studies' jobs only.
        waiting = []
        for job_id, study_id in queued:
            executor = self._executor_of(study_id)
            running = sum(1 for a in self.active.values() if a.owner is executor)
            if running >= executor.capacity(self.max_parallel) or not self.launch(job_id):
                waiting.append(study_id)
        return waiting

    def _keep_warm(self, waiting: list[str]) -> None:
        """One local standby while a local launch is to come: a queued job waiting for a slot (or for the
        standby's imports), or a training job running, after which its study goes on (more training, or the
        evaluate job); none otherwise, so no idle process holds torch's memory between runs. ``waiting``: the
        study ids of the jobs `_launch_queued` left queued."""
        local = [a for a in self.active.values() if a.owner is self.local]
        coming = any(a.job.kind in TRAINING_KINDS for a in local) or any(
            self._executor_of(study_id) is self.local for study_id in waiting
        )
        self.local.warm(coming)

    def launch(self, job_id: str) -> bool:
        """Start a queued job's worker (or adopt one already running it); False: it stays queued for now."""
        job = self._job(job_id)
        folder = job_dir(self.store.home, job_id)
        if job_id in self.active:
            raise HierconsoleError(f"job {job_id} is already running; it cannot be active twice")
        # An orchestrator killed between starting a worker and recording it leaves the job queued while
        # that attempt runs (or ran) unheard of: what it wrote is ingested first (idempotent, as for a
        # recovered job), and a worker of it still running is adopted rather than started twice.
        read = self._replay(job)
        holder = job_lock_holder(folder)
        if holder is not None:
            self._adopt_unrecorded(job, folder, holder, read)
            return True
        if job_lock_held(folder):
            raise HierconsoleError(f"job {job_id} is already running; it cannot be active twice")
        spec = JobSpec.read(layout.spec_path(folder))  # fail here, not in the worker, on an unreadable spec
        executor = self._executor_of(job.study_id)
        if executor is self.local and self.local.defers(spec):
            return False  # its standby forks it within seconds; a later tick launches it
        busy = {a.gpu for a in self.active.values() if a.gpu is not None}
        handle = executor.launch(job_id, folder, spec, busy_gpus=busy)
        if os.environ.get(LAUNCH_FAULT_ENV):
            os.kill(os.getpid(), signal.SIGKILL)  # the crash tests: dead before the launch is recorded
        # Judged from now on by what this worker writes: after a power loss the job folder still holds the
        # dead worker's heartbeat file, minutes old, and the new one needs a moment to beat first.
        self.active[job_id] = Active(
            job, folder, handle, executor, offset=read.offset, lines=read.lines, shown_node=handle.node,
            heartbeat_seen=time.time(),
        )
        self._record_running(job_id, handle)
        return True

    def _adopt_unrecorded(self, job: JobRef, folder: Path, pid: int, read: ev.EventsRead) -> None:
        """Drive a queued job's live worker that an earlier orchestrator started but never recorded."""
        handle = LocalHandle(pid, process_start_time(pid))
        log.info("adopting job %s: its worker PID %s was started by an orchestrator that died", job.job_id, pid)
        started = any(isinstance(e, ev.Start) for e in read.events)
        self.active[job.job_id] = Active(
            job, folder, handle, self.local, offset=read.offset, lines=read.lines, shown_node=handle.node,
            started=started,
        )
        self._record_running(job.job_id, handle)

    def _record_running(self, job_id: str, handle: Handle) -> None:
        self.store.execute(
            "UPDATE jobs SET state = ?, pid = ?, pid_start = ?, attempts = attempts + 1, "
            "started_at = coalesce(started_at, current_timestamp), heartbeat_at = current_timestamp, "
            "error = NULL, finished_at = NULL, executor = ?, node = ? WHERE job_id = ?",
            [JobState.RUNNING, handle.pid, handle.pid_start, handle.executor, handle.node, job_id],
        )

    # -- polling ------------------------------------------------------------------------------------
    def _write_events(self, job: JobRef, events: list[ev.Event]) -> None:
        self.store.write(lambda con: apply_events(con, job, events))

    def _drain(self, a: Active) -> None:
        """Ingest the complete lines a worker appended since the last read."""
        events = self._read_new(a)
        if not events:
            return
        self._write_events(a.job, events)
        if self.on_events:
            self.on_events(a.job_id, events)

    def _ingest_running(self) -> None:
        """Every running job's new lines and heartbeat, written in one transaction: a write's cost is
        per statement and per commit, not per event, so one write per job per tick scaled with the jobs."""
        batch: list[tuple[Active, list[ev.Event]]] = []
        beats: list[tuple[str, float]] = []
        for a in self.active.values():
            a.handle.pump()
            events = self._read_new(a)
            if events:
                batch.append((a, events))
            with contextlib.suppress(FileNotFoundError):
                mtime = (a.folder / layout.HEARTBEAT).stat().st_mtime
                if mtime > a.heartbeat_seen:
                    a.heartbeat_seen = mtime
                    beats.append((a.job_id, mtime))
        if not batch and not beats:
            return

        def write(con: Any) -> None:
            apply_batch(con, [(a.job, events) for a, events in batch])
            update_rows(con, "jobs", "job_id", ("heartbeat_at",), beats, "{c} = to_timestamp(u.{c})")

        self.store.write(write)
        if self.on_events:
            for a, events in batch:
                self.on_events(a.job_id, events)

    def _read_new(self, a: Active) -> list[ev.Event]:
        """The complete lines a worker appended since the last read (problems reported)."""
        read = ev.read_events(a.folder / layout.EVENTS, a.offset, a.lines)
        a.offset, a.lines = read.offset, read.lines
        for problem in read.problems:
            self.on_problem(a.job_id, problem)
        if read.events:
            a.last_events = (a.last_events + read.events)[-8:]
            a.started = a.started or any(isinstance(e, ev.Start) for e in read.events)
        return read.events

    def _poll(self, a: Active) -> None:
        """A running job's place, end, freeze or overdue cancel, after `_ingest_running` read its lines."""
        if a.handle.node != a.shown_node:
            a.shown_node = a.handle.node
            self.store.execute(
                "UPDATE jobs SET node = ?, pid = ?, pid_start = ? WHERE job_id = ?",
                [a.handle.node, a.handle.pid, a.handle.pid_start, a.job_id],
            )
        # The heartbeat thread beats every few seconds whatever the training does; a process that
        # stopped beating is frozen (SIGSTOP, a hung filesystem) and is ended so it cannot stay
        # "running" forever. It resumes from its last checkpoint.
        # A launched worker that never beats within the limit is frozen too (its clock starts at launch).
        if (
            a.heartbeat_seen
            and time.time() - a.heartbeat_seen > self.stale_after
            and a.cancel_requested_at is None
            and not a.stale
        ):
            a.stale = True
            a.handle.kill()
        ended = not a.handle.running()
        if a.cancel_requested_at is not None and not ended:
            if time.monotonic() - a.cancel_requested_at > CANCEL_GRACE_SECONDS:
                a.handle.kill()
            return
        if not ended:
            return
        a.handle.pump()  # what it sent between our last read and its exit
        self._drain(a)  # what it wrote between our last read and its exit
        del self.active[a.job_id]
        a.handle.release()
        state, error = _outcome(a.last_events, cancel_requested=a.cancel_requested_at is not None)
        if state == JobState.CRASHED and a.stale:
            error = f"worker sent no heartbeat for {self.stale_after:.0f} s and was killed; resume it"
        elif state == JobState.CRASHED:
            error = a.handle.exit_note()
        self._set_state(a.job_id, state, error)
        if state == JobState.FINISHED:
            advance(self.store, a.job.study_id)

    def _set_state(self, job_id: str, state: JobState, error: str | None) -> None:
        self.store.execute(
            "UPDATE jobs SET state = ?, error = ?, finished_at = current_timestamp WHERE job_id = ?",
            [state, error, job_id],
        )

    # -- control ------------------------------------------------------------------------------------
    def cancel(self, job_id: str) -> None:
        """SIGTERM now (the worker stops at the next batch), SIGKILL after a grace period."""
        if job_id in self.active:
            a = self.active[job_id]
            a.cancel_requested_at = time.monotonic()
            a.handle.terminate()
            return
        row = self.store.one("SELECT state FROM jobs WHERE job_id = ?", [job_id])
        if row is None:
            raise NotFoundError(f"no job {job_id!r}")
        if row[0] == JobState.QUEUED:
            self._set_state(job_id, JobState.CANCELLED, None)

    def cancel_all(self) -> None:
        for (job_id,) in self.store.rows(f"SELECT job_id FROM jobs WHERE state IN ({sql_list(ACTIVE_STATES)})"):
            self.cancel(job_id)

    def resume(self, job_ids: list[str]) -> list[str]:
        """Queue crashed, cancelled or failed jobs again; each continues from its last checkpoint."""
        requeued = []
        for job_id in job_ids:
            row = self.store.one("SELECT state FROM jobs WHERE job_id = ?", [job_id])
            if row is None:
                raise NotFoundError(f"no job {job_id!r}")
            if row[0] in RESUMABLE_STATES:
                self.store.execute(
                    "UPDATE jobs SET state = ?, error = NULL WHERE job_id = ?", [JobState.QUEUED, job_id]
                )
                requeued.append(job_id)
        return requeued

    def abandon(self, reason: str, *, cancel: bool = True) -> list[str]:
        """Stop driving without the store (it can no longer be written): stop our workers (SIGTERM, then
        SIGKILL after the grace period) or leave them running, and note `reason` in each job's folder,
        where the next orchestrator finds it. Returns the job ids. Never touches the store, never hangs."""
        ids = list(self.active)
        self.local.warm(False)
        for a in self.active.values():
            _note_stopped(a.folder, reason)
            if cancel:
                a.handle.terminate()
        deadline = time.monotonic() + CANCEL_GRACE_SECONDS
        while cancel and time.monotonic() < deadline and any(a.handle.running() for a in self.active.values()):
            time.sleep(0.1)
        for a in self.active.values():
            if cancel and a.handle.running():
                a.handle.kill()
            a.handle.wait(5)
        self.active.clear()
        return ids

    def shutdown(self, *, cancel: bool) -> None:
        """Leave: cancel our workers (waiting for them) or let them run on to be adopted later."""
        self.local.warm(False)
        if self.store.failed is not None:
            self.abandon(str(self.store.failed), cancel=cancel)
            return
        if not cancel:
            return
        self.cancel_all()
        deadline = time.monotonic() + CANCEL_GRACE_SECONDS + 5
        while self.active and time.monotonic() < deadline:
            self.tick()
            time.sleep(0.1)


def _note_stopped(folder: Path, reason: str) -> None:
    """Best effort, all or nothing: on a full disk even this small file may not fit."""
    staged = folder / f".{layout.STOPPED}.tmp"
    try:
        staged.write_text(f"stopped: {reason}\n")
        staged.replace(folder / layout.STOPPED)
    except OSError:
        staged.unlink(missing_ok=True)


def _outcome(events: list[ev.Event], *, cancel_requested: bool) -> tuple[JobState, str | None]:
    """A finished worker's end state from its last terminal event."""
    for e in reversed(events):
        if isinstance(e, ev.Done):
            return JobState.FINISHED, None
        if isinstance(e, ev.Failed):
            return JobState.FAILED, e.error
        if isinstance(e, ev.Cancelled):
            return JobState.CANCELLED, None
        if isinstance(e, ev.Start):
            break
    if cancel_requested:
        return JobState.CANCELLED, "killed after the cancel grace period"
    return JobState.CRASHED, None
