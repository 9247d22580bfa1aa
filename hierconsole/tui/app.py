"""The console app: views as modes, the orchestrator loop in a thread worker, app-wide state and quitting."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from textual import on, work
from textual.app import App
from textual.signal import Signal
from textual.worker import Worker, WorkerState, get_current_worker

from hierconsole.config import Preset, load_preset
from hierconsole.errors import HierconsoleError
from hierconsole.study import read
from hierconsole.study.catalog import ensure_dataset
from hierconsole.study.lifecycle import create_study
from hierconsole.study.orchestrator import Orchestrator
from hierconsole.study.storage import Store
from hierconsole.tui.actions import ActionsProvider, bindings_for
from hierconsole.tui.messages import (
    JobEvents,
    Notice,
    OrchestratorFailed,
    OrchestratorStopped,
    QueueChanged,
    StudyLaunched,
)
from hierconsole.tui.orchestration import OrchestratorLoop
from hierconsole.tui.screens.audits import AuditsScreen
from hierconsole.tui.screens.datasets import DatasetsScreen
from hierconsole.tui.screens.dialogs import QuitDialog
from hierconsole.tui.screens.effects import EffectsScreen
from hierconsole.tui.screens.export import ExportScreen
from hierconsole.tui.screens.families import FamiliesScreen
from hierconsole.tui.screens.help import HelpScreen
from hierconsole.tui.screens.launch import LaunchRequest
from hierconsole.tui.screens.redistribution import RedistributionScreen
from hierconsole.tui.screens.runs import RunsScreen
from hierconsole.vocabulary import ACTIVE_STATES

QuitChoice = Literal["ask", "cancel", "leave"]


@dataclass(frozen=True)
class DemoOffer:
    """What the one-keystroke demo launches: a preset, and how to get its dataset into the store."""

    preset: Preset
    dataset: Callable[[Store], str]

    @classmethod
    def default(cls) -> DemoOffer:
        preset = load_preset("demo")
        return cls(preset, lambda store: ensure_dataset(store, preset.data.dataset))


class HierConsole(App[int]):
    TITLE = "hierconsole"
    CSS_PATH = "hierconsole.tcss"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {ActionsProvider}
    MODES = {
        "datasets": DatasetsScreen,
        "runs": RunsScreen,
        "effects": EffectsScreen,
        "audits": AuditsScreen,
        "redistribution": RedistributionScreen,
        "export": ExportScreen,
        "families": FamiliesScreen,
    }

    def __init__(
        self,
        store: Store,
        *,
        orchestrate: bool = True,
        tick_interval: float = 0.5,
        max_parallel: int | None = None,
        gpus: list[str] | None = None,
        on_quit: QuitChoice = "ask",
        demo: DemoOffer | None = None,
        home_label: str | None = None,
        study: str | None = None,
    ):
        super().__init__()
        self.store = store
        self.orchestrate = orchestrate
        self._max_parallel = max_parallel
        self.on_quit = on_quit
        self.home_label = home_label if home_label is not None else str(store.home)
        self.demo = demo or DemoOffer.default()
        self.orchestrator_loop = OrchestratorLoop(
            store, self.post_message, interval=tick_interval, max_parallel=max_parallel, gpus=gpus
        )
        self.loop_done = threading.Event()
        """Set whenever no orchestrator loop runs: before it starts, after it stops, or never started."""
        self.loop_done.set()
        self.studies: list[read.StudyRow] = read.list_studies(store)
        self.jobs: list[read.JobRow] = []
        self.failed_audits: dict[str, int] = {}
        self.study_id: str | None = study or (self.studies[-1].study_id if self.studies else None)
        self._start_mode = "runs" if read.has_data(store) else "datasets"
        self.state_signal: Signal[str] = Signal(self, "state")
        """Published after any change of the studies, jobs, failed audits or the current study."""
        self.events_signal: Signal[JobEvents] = Signal(self, "events")
        self._quitting = False
        self._audits_seen = False

    # -- start-up ------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.switch_mode(self._start_mode)
        self.refresh_queue()
        if self.orchestrate:
            self.loop_done.clear()
            self.run_orchestrator()

    @work(thread=True, exclusive=True, exit_on_error=False, group="orchestrator")
    def run_orchestrator(self) -> None:
        worker = get_current_worker()
        try:
            self.orchestrator_loop.run(lambda: worker.is_cancelled)
        finally:
            self.loop_done.set()

    @work(thread=True, exclusive=True, exit_on_error=False, group="queue")
    def refresh_queue(self) -> None:
        self.post_message(
            QueueChanged(
                read.list_studies(self.store), read.job_rows(self.store), read.failed_audit_counts(self.store)
            )
        )

    # -- app-wide state ------------------------------------------------------------------------------
    def current_study(self) -> read.StudyRow | None:
        return next((s for s in self.studies if s.study_id == self.study_id), None)

    def set_study(self, study_id: str | None) -> None:
        if study_id != self.study_id:
            self.study_id = study_id
            self.state_signal.publish("study")

    @on(QueueChanged)
    def _queue_changed(self, message: QueueChanged) -> None:
        # Failures known at start-up are flagged in the tabs; a failure arriving now also gets a toast.
        for study_id, failed in message.failed_audits.items():
            if self._audits_seen and failed > self.failed_audits.get(study_id, 0):
                self.notify(
                    f"{failed} audit check(s) FAILED for {study_id}: see Audits (4)",
                    title="audits",
                    severity="error",
                    timeout=30,
                )
        self.studies, self.jobs, self.failed_audits = message.studies, message.jobs, message.failed_audits
        self._audits_seen = True
        known = {s.study_id for s in self.studies}
        if self.study_id not in known:  # deleted: fall back to the newest
            self.set_study(self.studies[-1].study_id if self.studies else None)
        self.state_signal.publish("queue")

    @on(JobEvents)
    def _job_events(self, message: JobEvents) -> None:
        self.events_signal.publish(message)

    @on(StudyLaunched)
    def _study_launched(self, message: StudyLaunched) -> None:
        if self._max_parallel is None:  # an explicit limit stays; otherwise honour what the preset asks
            self.orchestrator_loop.submit(lambda orch: _raise_parallel(orch, message.parallel))
        self.study_id = message.study_id
        self.refresh_queue()
        self.state_signal.publish("study")
        self.state_signal.publish("datasets")
        self.notify(f"launched study {message.study_id}", title="launch")
        self.switch_mode("runs")

    @on(Notice)
    def _notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity)  # type: ignore[arg-type]
        self.refresh_queue()

    @on(OrchestratorFailed)
    def _orchestrator_failed(self, message: OrchestratorFailed) -> None:
        self.notify(message.error, title="orchestrator", severity="error", timeout=10)

    def report_worker_error(self, event: Worker.StateChanged) -> None:
        """The one place a failed worker becomes visible: user errors as they are, bugs with their type."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        text = str(error) if isinstance(error, HierconsoleError) else f"{type(error).__name__}: {error}"
        self.notify(text, title=event.worker.name or "error", severity="error", timeout=10)

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        self.report_worker_error(event)

    def submit(self, command: Callable[[Orchestrator], str | None]) -> None:
        """Hand a command to the orchestrator loop (the only thread that may call the orchestrator)."""
        if not self.orchestrate or self.loop_done.is_set():
            self.notify("no orchestrator runs in this console", severity="error")
            return
        self.orchestrator_loop.submit(command)

    # -- launching -----------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="launch")
    def launch_demo(self) -> None:
        demo = self.demo
        dataset_id = demo.dataset(self.store)
        study_id = create_study(self.store, demo.preset, dataset_id)
        self.post_message(StudyLaunched(study_id, demo.preset.compute.max_parallel_jobs))

    @work(thread=True, exclusive=True, exit_on_error=False, group="launch")
    def launch(self, request: LaunchRequest) -> None:
        preset = load_preset(request.preset).with_overrides(
            epochs=request.epochs, seeds=list(request.seeds) if request.seeds else None
        )
        dataset_id = ensure_dataset(self.store, request.dataset or preset.data.dataset)
        study_id = create_study(self.store, preset, dataset_id)
        self.post_message(StudyLaunched(study_id, preset.compute.max_parallel_jobs))

    # -- actions -------------------------------------------------------------------------------------
    def action_show_view(self, mode: str) -> None:
        if self.current_mode != mode:
            self.switch_mode(mode)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        if self._quitting or isinstance(self.screen, QuitDialog):
            return
        if not self.orchestrate or self.loop_done.is_set():
            self.exit(0)
            return
        active = sum(j.state in ACTIVE_STATES for j in self.jobs)
        if not active:
            self._stop("leave")
        elif self.on_quit == "ask":
            self.push_screen(QuitDialog(active), self._stop)
        else:
            self._stop(self.on_quit)

    def _stop(self, choice: str | None) -> None:
        if choice not in ("cancel", "leave"):
            return
        self._quitting = True
        if choice == "cancel":
            self.notify("cancelling jobs (they stay resumable)…", timeout=30)
        self.orchestrator_loop.stop(cancel_jobs=choice == "cancel")

    @on(OrchestratorStopped)
    def _stopped(self, message: OrchestratorStopped) -> None:
        if self._quitting:
            self.exit(0)


def _raise_parallel(orch: Orchestrator, parallel: int) -> None:
    """A launched study may ask for more worker processes than those running now; never fewer."""
    orch.max_parallel = max(orch.max_parallel or 1, parallel)
