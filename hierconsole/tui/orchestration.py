"""The console's orchestrator loop: the one thread that ever touches the `Orchestrator`.

The UI thread never calls the orchestrator. It queues commands (cancel, resume, ...); this loop runs them
between ticks and reports what happened only by posting messages (the `post` callable), like Harlequin's
driver façade: nothing here may touch a widget.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.message import Message

from hierconsole.errors import HierconsoleError, StoreWriteError
from hierconsole.study import read
from hierconsole.tui.messages import JobEvents, Notice, OrchestratorFailed, OrchestratorStopped, QueueChanged

if TYPE_CHECKING:
    from hierconsole.contract.events import Event, LineProblem
    from hierconsole.study.commands import Orchestrator
    from hierconsole.study.db.storage import Store

Command = Callable[["Orchestrator"], str | None]
"""Runs on the loop thread with the orchestrator; returns a notice to show, or None."""


class Shutdown:
    def __init__(self, cancel_jobs: bool):
        self.cancel_jobs = cancel_jobs


class OrchestratorLoop:
    def __init__(
        self,
        store: Store,
        post: Callable[[Message], Any],
        *,
        interval: float = 0.5,
        max_parallel: int | None = None,
        gpus: list[str] | None = None,
    ):
        self.store = store
        self.gpus = gpus
        self.post = post
        self.interval = interval
        self.max_parallel = max_parallel
        self.commands: queue.Queue[Command | Shutdown] = queue.Queue()
        self._last: QueueChanged | None = None

    # -- called from the UI thread -------------------------------------------------------------------
    def submit(self, command: Command) -> None:
        self.commands.put(command)

    def stop(self, *, cancel_jobs: bool) -> None:
        self.commands.put(Shutdown(cancel_jobs))

    # -- the loop thread -----------------------------------------------------------------------------
    def _on_events(self, job_id: str, events: list[Event]) -> None:
        self.post(JobEvents(job_id, job_id.split("/", 1)[0], list(events)))

    def _on_problem(self, job_id: str, problem: LineProblem) -> None:
        self.post(Notice(f"job {job_id}: {problem}", severity="warning"))

    def _publish(self) -> None:
        update = QueueChanged(
            read.list_studies(self.store), read.job_rows(self.store), read.failed_audit_counts(self.store)
        )
        previous = self._last
        if previous is None or (update.studies, update.jobs, update.failed_audits) != (
            previous.studies,
            previous.jobs,
            previous.failed_audits,
        ):
            self._last = update
            self.post(update)

    def run(self, cancelled: Callable[[], bool]) -> None:
        """Recover, then tick until told to stop (or until the worker is cancelled: jobs are left running)."""
        from hierconsole.study.commands import Orchestrator  # on this thread, after the first frame

        orch = Orchestrator(
            self.store,
            max_parallel=self.max_parallel,
            on_events=self._on_events,
            on_problem=self._on_problem,
            gpus=self.gpus,
        )
        shutdown: Shutdown | None = None
        last_error: str | None = None
        broken = False  # the store can no longer be written
        while not cancelled():
            try:
                item = self.commands.get(timeout=self.interval)
            except queue.Empty:
                item = None
            try:
                while item is not None:
                    if isinstance(item, Shutdown):
                        shutdown = item
                        break
                    notice = item(orch)
                    if notice:
                        self.post(Notice(notice))
                    item = self.commands.get_nowait() if not self.commands.empty() else None
                if shutdown is not None:
                    break
                if broken:
                    continue
                orch.tick()
                self._publish()
            except StoreWriteError as exc:
                # Nothing more can be saved: stop driving (workers run on, to be adopted by `resume`
                # once the cause is fixed), say so once, and stay responsive so the user can read and quit.
                orch.abandon(str(exc), cancel=False)
                broken = True
                self.post(OrchestratorFailed(str(exc)))
            except Exception as exc:  # noqa: BLE001 - the loop must survive one bad tick; the user is told
                # A user error reads as itself, a bug with its type; each once, not once per tick.
                error = str(exc) if isinstance(exc, HierconsoleError) else f"{type(exc).__name__}: {exc}"
                if error != last_error:
                    self.post(OrchestratorFailed(error))
                last_error = error
            else:
                last_error = None
        cancel_jobs = shutdown.cancel_jobs if shutdown is not None else False
        orch.shutdown(cancel=cancel_jobs)
        # Jobs left on a Ray cluster run on (the next console re-attaches); a Ray instance this console
        # started ends here, and its jobs with it (the next orchestrator marks them crashed, resumable).
        orch.close_executors()
        if cancel_jobs:
            self._publish()
        self.post(OrchestratorStopped(cancel_jobs))


def raise_parallel(orch: Orchestrator, parallel: int) -> None:
    """A launched or resumed study may ask for more worker processes than those running now; never fewer.
    Called on the orchestrator's thread."""
    orch.max_parallel = max(orch.max_parallel or 1, parallel)
