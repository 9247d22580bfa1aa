"""The orchestrator: queued jobs become worker processes; their events become store rows.

Workers are started with Popen (never fork: DuckDB is not fork-safe), never open the store, and append
events to their folder's events.jsonl. The orchestrator tails those files, writes the events through the
store's single writer, decides each job's end state from its last event and exit, and advances studies.
A worker outlives an orchestrator that dies: the next orchestrator adopts it if it still runs, or marks
it crashed (PID gone, or reused by another process) so it can be resumed from its last checkpoint.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.ingest import apply_events, read_events
from hierconsole.jobspec import JobSpec
from hierconsole.storage import Store
from hierconsole.studies import advance, job_dir

TERMINAL = ("finished", "failed", "cancelled", "crashed")
CANCEL_GRACE_SECONDS = 10.0
STALE_HEARTBEAT_SECONDS = 120.0


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if no such process.

    Together with the PID it names one process: a PID reused after a crash has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None
    # Field 22, counted after the parenthesised command name (which may itself hold spaces).
    return stat.rsplit(")", 1)[1].split()[19]


def pid_alive(pid: int, start: str | None) -> bool:
    if pid <= 0:
        return False
    current = process_start_time(pid)
    if current is not None:
        if current == start or start is None:
            # A zombie (our own child that exited and was not yet reaped) is not alive.
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                return False
            return state != "Z"
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start is None


def job_lock_held(folder: Path) -> bool:
    """Whether some live worker holds the job's lock file (workers take it for their whole life)."""
    path = folder / "job.lock"
    if not path.exists():
        return False
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False


@dataclass
class Active:
    job_id: str
    study_id: str
    kind: str
    seed: int
    folder: Path
    pid: int
    pid_start: str | None
    proc: subprocess.Popen | None = None
    gpu: str | None = None
    offset: int = 0
    cancel_requested_at: float | None = None
    stale: bool = False
    heartbeat_seen: float = 0.0
    last_events: list[dict[str, Any]] = field(default_factory=list)


class Orchestrator:
    """Drives jobs of one store. Call `tick()` periodically (the CLI loops; the TUI uses a timer thread)."""

    def __init__(
        self,
        store: Store,
        *,
        max_parallel: int | None = None,
        python: str | None = None,
        on_events: Callable[[str, list[dict[str, Any]]], None] | None = None,
        gpus: list[str] | None = None,
        stale_after: float = STALE_HEARTBEAT_SECONDS,
    ):
        self.stale_after = stale_after
        self.store = store
        self.max_parallel = max_parallel
        # One worker per GPU: each sees only its own device through CUDA_VISIBLE_DEVICES.
        self.gpus = list(gpus or [])
        self.python = python or sys.executable
        self.on_events = on_events
        self.active: dict[str, Active] = {}
        self.recover()

    # -- start-up -----------------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """Settle jobs left "running" by an earlier orchestrator. Returns the ids marked crashed.

        Each such job's events are replayed first (whatever the dead orchestrator had not ingested). A
        live worker is adopted; a worker that ended on its own is given the state its last event says
        (and its study moves on); one that vanished without a final event is marked crashed. Jobs in
        other states were fully ingested when they ended, so start-up stays fast on a large store.
        """
        crashed = []
        for job in self.store.dicts(
            "SELECT job_id, study_id, kind, seed, state, pid, pid_start FROM jobs WHERE state = 'running'"
        ):
            folder = job_dir(self.store, job["job_id"])
            events, offset = self.replay(job)
            if job["pid"] and pid_alive(job["pid"], job["pid_start"]):
                self.active[job["job_id"]] = Active(
                    job["job_id"],
                    job["study_id"],
                    job["kind"],
                    job["seed"],
                    folder,
                    job["pid"],
                    job["pid_start"],
                    offset=offset,
                )
                continue
            state, error = _outcome(events, cancel_requested=False)
            if state == "crashed":
                error = f"worker PID {job['pid']} is gone (orchestrator restarted); resume it with `hierconsole resume`"
                crashed.append(job["job_id"])
            self._set_state(job["job_id"], state, error)
            if state == "finished":
                advance(self.store, job["study_id"])
        return crashed

    def replay(self, job: dict[str, Any] | str) -> tuple[list[dict[str, Any]], int]:
        """Write a job's whole events.jsonl again (idempotent); returns the events and the file offset."""
        if isinstance(job, str):
            job = self.store.dicts("SELECT job_id, study_id, kind, seed FROM jobs WHERE job_id = ?", [job])[0]
        events, offset = read_events(job_dir(self.store, job["job_id"]) / "events.jsonl")
        if events:
            self._write_events(job, events)
        return events, offset

    # -- the loop -----------------------------------------------------------------------------------
    def tick(self) -> None:
        for job_id in list(self.active):
            self._poll(self.active[job_id])
        self._launch_queued()

    def busy(self, study_ids: list[str] | None = None) -> bool:
        sql = "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')"
        params: list[Any] = []
        if study_ids:
            sql += " AND study_id IN (SELECT unnest(?))"
            params.append(study_ids)
        return bool(self.active) or self.store.one(sql, params)[0] > 0

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

    # -- launching ----------------------------------------------------------------------------------
    def _capacity(self) -> int:
        if self.gpus:
            return len(self.gpus)
        if self.max_parallel is not None:
            return self.max_parallel
        return 1

    def _launch_queued(self) -> None:
        while len(self.active) < self._capacity():
            row = self.store.one(
                "SELECT job_id FROM jobs WHERE state = 'queued' ORDER BY "
                "CASE kind WHEN 'tune' THEN 0 WHEN 'final' THEN 1 ELSE 2 END, created_at, seed, tau, job_id LIMIT 1"
            )
            if row is None:
                return
            self.launch(row[0])

    def launch(self, job_id: str) -> None:
        job = self.store.dicts("SELECT * FROM jobs WHERE job_id = ?", [job_id])[0]
        folder = job_dir(self.store, job_id)
        if job_id in self.active or job_lock_held(folder):
            raise HierconsoleError(f"job {job_id} is already running; it cannot be active twice")
        spec_path = folder / "spec.json"
        JobSpec.read(spec_path)  # fail here, not in the worker, on an unreadable spec
        log = open(folder / "worker.log", "ab")  # noqa: SIM115 - handed to the child
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", str(job["threads"] or 1))
        gpu = None
        if self.gpus:
            busy = {a.gpu for a in self.active.values()}
            gpu = next(g for g in self.gpus if g not in busy)
            env["CUDA_VISIBLE_DEVICES"] = gpu
        proc = subprocess.Popen(
            [self.python, "-m", "hierconsole.worker", str(spec_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C in the terminal is the orchestrator's to handle
        )
        log.close()
        start = process_start_time(proc.pid)
        events_path = folder / "events.jsonl"
        offset = events_path.stat().st_size if events_path.exists() else 0
        self.active[job_id] = Active(
            job_id,
            job["study_id"],
            job["kind"],
            job["seed"],
            folder,
            proc.pid,
            start,
            proc=proc,
            gpu=gpu,
            offset=offset,
        )
        self.store.execute(
            "UPDATE jobs SET state = 'running', pid = ?, pid_start = ?, attempts = attempts + 1, "
            "started_at = coalesce(started_at, current_timestamp), heartbeat_at = current_timestamp, "
            "error = NULL, finished_at = NULL WHERE job_id = ?",
            [proc.pid, start, job_id],
        )

    # -- polling ------------------------------------------------------------------------------------
    def _write_events(self, job: dict[str, Any], events: list[dict[str, Any]]) -> None:
        self.store.write(
            lambda con: apply_events(con, job["job_id"], job["study_id"], job["kind"], job["seed"], events)
        )

    def _drain(self, a: Active) -> None:
        """Ingest the complete lines a worker appended since the last read."""
        events, a.offset = read_events(a.folder / "events.jsonl", a.offset)
        if not events:
            return
        self._write_events(
            {"job_id": a.job_id, "study_id": a.study_id, "kind": a.kind, "seed": a.seed}, events
        )
        a.last_events = (a.last_events + events)[-8:]
        if self.on_events:
            self.on_events(a.job_id, events)

    def _poll(self, a: Active) -> None:
        self._drain(a)
        beat = a.folder / "heartbeat"
        if beat.exists():
            mtime = beat.stat().st_mtime
            if mtime != a.heartbeat_seen:
                a.heartbeat_seen = mtime
                self.store.execute(
                    "UPDATE jobs SET heartbeat_at = to_timestamp(?) WHERE job_id = ?", [mtime, a.job_id]
                )
            # The heartbeat thread beats every few seconds whatever the training does; a process that
            # stopped beating is frozen (SIGSTOP, a hung filesystem) and is ended so it cannot stay
            # "running" forever. It resumes from its last checkpoint.
            if time.time() - mtime > self.stale_after and a.cancel_requested_at is None and not a.stale:
                a.stale = True
                self._signal(a, signal.SIGKILL)
        ended = a.proc.poll() is not None if a.proc is not None else not pid_alive(a.pid, a.pid_start)
        if a.cancel_requested_at is not None and not ended:
            if time.monotonic() - a.cancel_requested_at > CANCEL_GRACE_SECONDS:
                self._signal(a, signal.SIGKILL)
            return
        if not ended:
            return
        self._drain(a)  # what it wrote between our last read and its exit
        del self.active[a.job_id]
        state, error = _outcome(a.last_events, cancel_requested=a.cancel_requested_at is not None)
        if state == "crashed" and a.stale:
            error = f"worker sent no heartbeat for {self.stale_after:.0f} s and was killed; resume it"
        elif state == "crashed" and a.proc is not None:
            error = f"worker exited with status {a.proc.returncode} without a final event; see worker.log"
        self._set_state(a.job_id, state, error)
        if state == "finished":
            advance(self.store, a.study_id)

    def _set_state(self, job_id: str, state: str, error: str | None) -> None:
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
        if row[0] == "queued":
            self._set_state(job_id, "cancelled", None)

    def cancel_all(self) -> None:
        for job_id in [
            r[0] for r in self.store.rows("SELECT job_id FROM jobs WHERE state IN ('queued', 'running')")
        ]:
            self.cancel(job_id)

    def resume(self, job_ids: list[str]) -> list[str]:
        """Queue crashed, cancelled or failed jobs again; each continues from its last checkpoint."""
        requeued = []
        for job_id in job_ids:
            row = self.store.one("SELECT state FROM jobs WHERE job_id = ?", [job_id])
            if row is None:
                raise NotFoundError(f"no job {job_id!r}")
            if row[0] in ("crashed", "cancelled", "failed"):
                self.store.execute(
                    "UPDATE jobs SET state = 'queued', error = NULL WHERE job_id = ?", [job_id]
                )
                requeued.append(job_id)
        return requeued

    def shutdown(self, *, cancel: bool) -> None:
        """Leave: cancel our workers (waiting for them) or let them run on to be adopted later."""
        if not cancel:
            return
        self.cancel_all()
        deadline = time.monotonic() + CANCEL_GRACE_SECONDS + 5
        while self.active and time.monotonic() < deadline:
            self.tick()
            time.sleep(0.1)


def _outcome(events: list[dict[str, Any]], *, cancel_requested: bool) -> tuple[str, str | None]:
    """A finished worker's end state from its last terminal event."""
    for ev in reversed(events):
        kind = ev.get("kind")
        if kind == "done":
            return "finished", None
        if kind == "failed":
            return "failed", ev.get("error")
        if kind == "cancelled":
            return "cancelled", None
        if kind == "start":
            break
    if cancel_requested:
        return "cancelled", "killed after the cancel grace period"
    return "crashed", None
