"""The orchestrator: queued jobs become worker processes; their events become store rows.

Workers are started with Popen (never fork: DuckDB is not fork-safe) by module name, so this process
never imports the engine (nor torch); they never open the store, and append typed events to their
folder's events.jsonl. The orchestrator tails those files, writes the events through the store's single
writer, decides each job's end state from its last event and exit, and advances studies. A worker
outlives an orchestrator that dies: the next orchestrator adopts it if it still runs, or marks it
crashed (PID gone, or reused by another process) so it can be resumed from its last checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.locations import job_dir
from hierconsole.study.ingest import JobRef, apply_batch, apply_events, update_from_values
from hierconsole.study.lifecycle import advance
from hierconsole.study.processes import job_lock_held, pid_alive, process_start_time
from hierconsole.study.standby import Standbys
from hierconsole.study.storage import Store
from hierconsole.study.views import kind_order, sql_list
from hierconsole.vocabulary import ACTIVE_STATES, RESUMABLE_STATES, TRAINING_KINDS, JobKind, JobState

WORKER_MODULE = "hierconsole.engine.worker"
"""Started as `python -m WORKER_MODULE --home HOME SPEC`: the orchestrator never imports it."""
CANCEL_GRACE_SECONDS = 10.0
STALE_HEARTBEAT_SECONDS = 120.0

log = logging.getLogger("hierconsole.orchestrator")

EventsCallback = Callable[[str, list[ev.Event]], None]
ProblemCallback = Callable[[str, ev.LineProblem], None]


@dataclass
class Active:
    job: JobRef
    folder: Path
    pid: int
    pid_start: str | None
    proc: subprocess.Popen[bytes] | None = None
    gpu: str | None = None
    offset: int = 0
    lines: int = 0
    cancel_requested_at: float | None = None
    stale: bool = False
    heartbeat_seen: float = 0.0
    last_events: list[ev.Event] = field(default_factory=list)
    started: bool = False
    """Its worker has reported its start (its imports are done)."""

    @property
    def job_id(self) -> str:
        return self.job.job_id


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
        warm: bool = True,
    ):
        self.stale_after = stale_after
        self.studies = list(studies) if studies is not None else None
        """Launch only these studies' queued jobs (None: every study's)."""
        self.store = store
        self.max_parallel = max_parallel
        # One worker per GPU: each sees only its own device through CUDA_VISIBLE_DEVICES.
        self.gpus = list(gpus or [])
        self.python = python or sys.executable
        self.on_events = on_events
        self.on_problem = on_problem
        """Told of every events-file line that was skipped (malformed, torn, from a newer version)."""
        self.active: dict[str, Active] = {}
        self.standbys = Standbys(self.python, WORKER_MODULE, store.home) if warm else None
        """Warm CPU workers for the launches to come (see `study.standby`); None: every launch starts cold."""
        self._launch_env: dict[str, str] | None = None
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
        for job_id, pid, pid_start in self.store.rows(
            "SELECT job_id, pid, pid_start FROM jobs WHERE state = ?", [JobState.RUNNING]
        ):
            job = self._job(job_id)
            read = self._replay(job)
            folder = job_dir(self.store.home, job_id)
            # The worker must be alive *and* hold this folder's lock: in a copied or moved home the PID
            # may be the original home's live worker, which writes elsewhere and is not ours to adopt.
            alive = bool(pid) and pid_alive(pid, pid_start)
            if alive and job_lock_held(folder):
                (folder / layout.STOPPED).unlink(missing_ok=True)  # driven again: an old reason is stale
                self.active[job_id] = Active(
                    job, folder, pid, pid_start, offset=read.offset, lines=read.lines, started=True
                )
                continue
            state, error = _outcome(read.events, cancel_requested=False)
            if state == JobState.CRASHED:
                error = (
                    f"worker PID {pid} runs, but not for this job folder (a copied or moved home?); "
                    f"resume it here with `hierconsole resume`"
                    if alive
                    else f"worker PID {pid} is gone (orchestrator restarted); resume it with `hierconsole resume`"
                )
                crashed.append(job_id)
            stopped = job_dir(self.store.home, job_id) / layout.STOPPED
            if state != JobState.FINISHED and stopped.exists():
                error = stopped.read_text(errors="replace").strip() or error
            self._set_state(job_id, state, error)
            stopped.unlink(missing_ok=True)
            if state == JobState.FINISHED:
                advance(self.store, job.study_id)
        return crashed

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
        self._launch_queued()
        self._keep_warm()

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
        if not self.active and self.standbys is not None:
            self.standbys.close()

    # -- launching ----------------------------------------------------------------------------------
    def _capacity(self) -> int:
        if self.gpus:
            return len(self.gpus)
        if self.max_parallel is not None:
            return self.max_parallel
        return 1

    def _launch_queued(self) -> None:
        only, params = ("", [])
        if self.studies is not None:
            only, params = ("AND study_id IN (SELECT unnest(?))", [self.studies])
        while len(self.active) < self._capacity():
            row = self.store.one(
                f"SELECT job_id FROM jobs WHERE state = ? {only} "
                f"ORDER BY {kind_order('kind')}, created_at, seed, tau, job_id LIMIT 1",
                [JobState.QUEUED, *params],
            )
            if row is None:
                return
            self.launch(row[0])

    def _keep_warm(self) -> None:
        """One standby while a launch is to come: a queued job waiting for a slot, or a training job
        running, after which its study goes on (more training, or the evaluate job). None otherwise.
        It is started once the running workers have started, so that its imports do not compete with theirs."""
        if self.standbys is None or self.gpus or self._launch_env is None:
            return
        if not all(a.started for a in self.active.values()):
            return  # workers still importing: a standby started now would only slow their start
        coming = any(a.job.kind in TRAINING_KINDS for a in self.active.values())
        if not coming:
            only, params = ("", [])
            if self.studies is not None:
                only, params = ("AND study_id IN (SELECT unnest(?))", [self.studies])
            queued = self.store.value(f"SELECT count(*) FROM jobs WHERE state = ? {only}", [JobState.QUEUED, *params])
            coming = queued > 0
        if coming:
            self.standbys.prepare(self._launch_env)
        else:
            self.standbys.close()

    def launch(self, job_id: str) -> None:
        job = self._job(job_id)
        folder = job_dir(self.store.home, job_id)
        if job_id in self.active or job_lock_held(folder):
            raise HierconsoleError(f"job {job_id} is already running; it cannot be active twice")
        spec_path = layout.spec_path(folder)
        spec = JobSpec.read(spec_path)  # fail here, not in the worker, on an unreadable spec
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", str(spec.threads))
        gpu = None
        proc = None
        if self.gpus:
            busy = {a.gpu for a in self.active.values()}
            gpu = next(g for g in self.gpus if g not in busy)
            env["CUDA_VISIBLE_DEVICES"] = gpu
        elif self.standbys is not None:
            self._launch_env = dict(env)
            proc = self.standbys.take(env, spec_path)
        if proc is None:
            log_file = open(folder / layout.WORKER_LOG, "ab")  # noqa: SIM115 - handed to the child
            proc = subprocess.Popen(
                [self.python, "-m", WORKER_MODULE, "--home", str(self.store.home), str(spec_path)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal is the orchestrator's to handle
            )
            log_file.close()
        start = process_start_time(proc.pid)
        # Lines written by earlier attempts were ingested when those ended: read on from their end.
        offset, lines = ev.complete_lines(folder / layout.EVENTS)
        self.active[job_id] = Active(job, folder, proc.pid, start, proc=proc, gpu=gpu, offset=offset, lines=lines)
        self.store.execute(
            "UPDATE jobs SET state = ?, pid = ?, pid_start = ?, attempts = attempts + 1, "
            "started_at = coalesce(started_at, current_timestamp), heartbeat_at = current_timestamp, "
            "error = NULL, finished_at = NULL WHERE job_id = ?",
            [JobState.RUNNING, proc.pid, start, job_id],
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
            events = self._read_new(a)
            if events:
                batch.append((a, events))
            beat = a.folder / layout.HEARTBEAT
            with contextlib.suppress(FileNotFoundError):
                mtime = beat.stat().st_mtime
                if mtime != a.heartbeat_seen:
                    a.heartbeat_seen = mtime
                    beats.append((a.job_id, mtime))
        if not batch and not beats:
            return

        def write(con: Any) -> None:
            apply_batch(con, [(a.job, events) for a, events in batch])
            if beats:
                update_from_values(con, "jobs", "job_id", ("heartbeat_at",), beats, "{c} = to_timestamp(v.{c})")

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
        """A running job's end (or freeze, or overdue cancel), after `_ingest_running` read its lines."""
        # The heartbeat thread beats every few seconds whatever the training does; a process that
        # stopped beating is frozen (SIGSTOP, a hung filesystem) and is ended so it cannot stay
        # "running" forever. It resumes from its last checkpoint.
        if (
            a.heartbeat_seen
            and time.time() - a.heartbeat_seen > self.stale_after
            and a.cancel_requested_at is None
            and not a.stale
        ):
            a.stale = True
            self._signal(a, signal.SIGKILL)
        ended = not _running(a)
        if a.cancel_requested_at is not None and not ended:
            if time.monotonic() - a.cancel_requested_at > CANCEL_GRACE_SECONDS:
                self._signal(a, signal.SIGKILL)
            return
        if not ended:
            return
        self._drain(a)  # what it wrote between our last read and its exit
        del self.active[a.job_id]
        state, error = _outcome(a.last_events, cancel_requested=a.cancel_requested_at is not None)
        if state == JobState.CRASHED and a.stale:
            error = f"worker sent no heartbeat for {self.stale_after:.0f} s and was killed; resume it"
        elif state == JobState.CRASHED and a.proc is not None:
            error = f"worker exited with status {a.proc.returncode} without a final event; see worker.log"
        self._set_state(a.job_id, state, error)
        if state == JobState.FINISHED:
            advance(self.store, a.job.study_id)

    def _set_state(self, job_id: str, state: JobState, error: str | None) -> None:
        self.store.execute(
            "UPDATE jobs SET state = ?, error = ?, finished_at = current_timestamp WHERE job_id = ?",
            [state, error, job_id],
        )

    # -- control ------------------------------------------------------------------------------------
    def _signal(self, a: Active, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(a.pid, sig)

    def cancel(self, job_id: str) -> None:
        """SIGTERM now (the worker stops at the next batch), SIGKILL after a grace period."""
        if job_id in self.active:
            a = self.active[job_id]
            a.cancel_requested_at = time.monotonic()
            self._signal(a, signal.SIGTERM)
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
        if self.standbys is not None:
            self.standbys.close()
        for a in self.active.values():
            _note_stopped(a.folder, reason)
            if cancel:
                self._signal(a, signal.SIGTERM)
        deadline = time.monotonic() + CANCEL_GRACE_SECONDS
        while cancel and time.monotonic() < deadline and any(_running(a) for a in self.active.values()):
            time.sleep(0.1)
        for a in self.active.values():
            if cancel and _running(a):
                self._signal(a, signal.SIGKILL)
            if a.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    a.proc.wait(timeout=5)
        self.active.clear()
        return ids

    def shutdown(self, *, cancel: bool) -> None:
        """Leave: cancel our workers (waiting for them) or let them run on to be adopted later."""
        if self.standbys is not None:
            self.standbys.close()
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


def _running(a: Active) -> bool:
    return a.proc.poll() is None if a.proc is not None else pid_alive(a.pid, a.pid_start)


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
