"""The console app: views as modes, the orchestrator loop in a thread worker, app-wide state and quitting."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Literal, cast

from textual import on, work
from textual.app import App, ComposeResult
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.signal import Signal
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState, get_current_worker

from hierconsole.errors import HierconsoleError
from hierconsole.plurals import counted
from hierconsole.study import read
from hierconsole.tui.actions import ActionsProvider, bindings_for
from hierconsole.tui.messages import (
    JobEvents,
    Notice,
    OrchestratorFailed,
    OrchestratorStopped,
    QueueChanged,
    StudyLaunched,
)
from hierconsole.tui.orchestration import OrchestratorLoop, raise_parallel
from hierconsole.tui.screens.dialogs import ConfirmDialog, QuitDialog
from hierconsole.tui.widgets.chrome import NavBar, NoticeText
from hierconsole.vocabulary import ACTIVE_STATES

if TYPE_CHECKING:
    from hierconsole.config import Preset
    from hierconsole.study.commands import Orchestrator
    from hierconsole.study.db.storage import Store

VIEW_SCREENS: dict[str, str] = {
    "datasets": "datasets:DatasetsScreen",
    "runs": "runs:RunsScreen",
    "effects": "effects:EffectsScreen",
    "audits": "audits:AuditsScreen",
    "redistribution": "redistribution:RedistributionScreen",
    "export": "export:ExportScreen",
    "families": "families:FamiliesScreen",
    "replication": "replication:ReplicationScreen",
}
"""Each view's screen (module:class under hierconsole.tui.screens), imported when first shown: the
first frame waits only for the view it shows; the others are imported in the background after it."""
WARM_UP: tuple[str, ...] = (
    *(f"hierconsole.tui.screens.{ref.split(':')[0]}" for ref in VIEW_SCREENS.values()),
    "hierconsole.tui.screens.run_detail",
    "hierconsole.tui.screens.launch",
    "hierconsole.tui.screens.import_dialog",
    "hierconsole.tui.screens.help",
    "hierconsole.study.read.audits",
    "hierconsole.study.read.results",
    "hierconsole.study.read.datasets",
)


def view_screen(mode: str) -> Screen:
    module, name = VIEW_SCREENS[mode].split(":")
    return cast("type[Screen]", getattr(importlib.import_module(f"hierconsole.tui.screens.{module}"), name))()


QuitChoice = Literal["ask", "cancel", "leave"]


@dataclass(frozen=True)
class DemoOffer:
    """What the one-keystroke demo launches: a preset, and the dataset it runs on (given the store, in
    which a test may register its own first; built-in synthetic data is registered by the launch)."""

    preset: Preset
    dataset: Callable[[Store], str]

    @classmethod
    def default(cls) -> DemoOffer:
        from hierconsole.config import load_preset

        preset = load_preset("demo")

        def dataset(store: Store) -> str:  # noqa: ARG001 - the launch registers built-in synthetic data
            return preset.data.dataset

        return cls(preset, dataset)


class HierConsole(App[int]):
    TITLE = "hierconsole"
    CSS_PATH = "hierconsole.tcss"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {ActionsProvider}
    MODES = {mode: partial(view_screen, mode) for mode in VIEW_SCREENS}

    def __init__(
        self,
        store: Store | None,
        *,
        open_store: Callable[[], Store] | None = None,
        orchestrate: bool = True,
        tick_interval: float = 0.5,
        max_parallel: int | None = None,
        gpus: list[str] | None = None,
        on_quit: QuitChoice = "ask",
        demo: DemoOffer | None = None,
        home_label: str | None = None,
        study: str | None = None,
        cursor_blink: bool = True,
        prebuild_views: bool = True,
    ):
        super().__init__()
        self.prebuild_views = prebuild_views
        """Build the views not shown yet in the idle time after the first frame (off in most tests)."""
        self.cursor_blink = cursor_blink
        """Whether text fields blink their cursor (off in tests: a screenshot must not depend on time)."""
        self.orchestrate = orchestrate
        self._max_parallel = max_parallel
        self.on_quit = on_quit
        self._options = (tick_interval, gpus, demo, home_label)
        self.loop_done = threading.Event()
        """Set whenever no orchestrator loop runs: before it starts, after it stops, or never started."""
        self.loop_done.set()
        self.studies: list[read.StudyRow] = []
        self.jobs: list[read.JobRow] = []
        self.failed_audits: dict[str, int] = {}
        self.study_id: str | None = study
        self._start_mode = "datasets"
        self.opening = open_store if store is None else None
        """Opens the store (`run_app`'s, for a store given as None): the console paints its first frame (the
        view tabs and a loading line) before it calls it, in a thread, and starts on the store it returns."""
        self.opened: Store | None = None
        """The store `opening` returned, as soon as it did (`run_app` closes it)."""
        self.open_error: HierconsoleError | None = None
        """Why the store could not be opened (the console then exits; `run_app` says it)."""
        self.store_settled = threading.Event()
        """Set whenever no call of `opening` is under way (`run_app` waits for it before closing)."""
        self.store_settled.set()
        self.ready = False
        """The store is open and the views may be shown."""
        if store is not None:
            self._attach_store(store, demo or DemoOffer.default(), read.list_studies(store), read.has_data(store))
        elif open_store is None:
            raise ValueError("HierConsole needs a store, or open_store to open one")
        self.state_signal: Signal[str] = Signal(self, "state")
        """Published after any change of the studies, jobs, failed audits or the current study."""
        self.events_signal: Signal[JobEvents] = Signal(self, "events")
        self.notice_signal: Signal[NoticeText] = Signal(self, "notice")
        """Every notification, for the notice line of the view showing (toasts are not drawn)."""
        self.latest_notice: NoticeText | None = None
        self._quitting = False
        self.own_ray_studies: set[str] = set()
        """Studies launched on a Ray instance this console started (it ends when the console quits)."""
        self._audits_seen = False

    # -- start-up ------------------------------------------------------------------------------------
    def _attach_store(self, store: Store, demo: DemoOffer, studies: list[read.StudyRow], has_data: bool) -> None:
        """Everything that needs the store, once it is open."""
        tick_interval, gpus, _, home_label = self._options
        self.store = store
        self.home_label = home_label if home_label is not None else str(store.home)
        self.demo = demo
        self.orchestrator_loop = OrchestratorLoop(
            store, self.post_message, interval=tick_interval, max_parallel=self._max_parallel, gpus=gpus
        )
        self.studies = studies
        self.study_id = self.study_id or (studies[-1].study_id if studies else None)
        self._start_mode = "runs" if has_data else "datasets"
        self.ready = True

    def compose(self) -> ComposeResult:
        """The first frame while the store opens: the view tabs, where, a loading line and the keys."""
        if self.opening is not None:
            yield NavBar("", id="nav")
            yield Static(f"opening the store in {self._options[3] or 'the home'}…", id="opening")
            yield Footer(compact=True)

    def on_mount(self) -> None:
        if self.opening is not None:
            self.call_after_refresh(self._begin_opening)  # once the first frame is painted
            return
        self._start()

    def _begin_opening(self) -> None:
        self.store_settled.clear()
        self._open_store()

    @work(thread=True, exclusive=True, exit_on_error=False, group="open")
    def _open_store(self) -> None:
        """Open the store, then read what the first view needs (off the UI thread)."""
        assert self.opening is not None
        try:
            try:
                store = self.opened = self.opening()
            finally:
                self.store_settled.set()
            demo = self._options[2] or DemoOffer.default()
            studies, has_data = read.list_studies(store), read.has_data(store)
        except HierconsoleError as exc:
            self.call_from_thread(self._not_opened, exc)
            return
        self.call_from_thread(self._opened, store, demo, studies, has_data)

    def _not_opened(self, exc: HierconsoleError) -> None:
        self.open_error = exc
        self.exit(exc.exit_code, return_code=exc.exit_code)

    def _opened(self, store: Store, demo: DemoOffer, studies: list[read.StudyRow], has_data: bool) -> None:
        if self._closing or self._closed or not self.is_running:
            return
        self._attach_store(store, demo, studies, has_data)
        self._start()

    def _start(self) -> None:
        self.switch_mode(self._start_mode)
        self.refresh_queue()
        if self.orchestrate:
            self.loop_done.clear()
            self.run_orchestrator()
        self.call_after_refresh(self.warm_up)

    @work(thread=True, exclusive=True, exit_on_error=False, group="warm-up")
    def warm_up(self) -> None:
        """After the first frame: import what the other views need, then build them one by one."""
        for module in WARM_UP:
            importlib.import_module(module)
        if self.prebuild_views:
            self.call_from_thread(self.prebuild_next_view)

    def prebuild_next_view(self) -> None:
        """Build one view not built yet, then let keys through before the next. Textual restyles the
        whole app when a view's screen is first built (a few hundred ms on a busy machine); done here,
        in idle time, the first switch to each view is as quick as any later one."""
        # Nothing to build for a console that is closing: Textual's shutdown (which clears `is_running`
        # first, before `_closing` in a test's run_test) walks the modes and must not see one added.
        if self._closing or self._closed or not self.is_running:
            return
        built = getattr(self, "_screen_stacks", None)  # Textual's modes; absent in another version
        pending = [mode for mode in VIEW_SCREENS if built is not None and mode not in built]
        if not pending:
            return
        self._init_mode(pending[0])
        self.set_timer(0.05, self.prebuild_next_view)

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

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Recorded as Textual records it, and said on the notice line of the view (toasts are hidden)."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        seconds = timeout if timeout is not None else (12.0 if severity == "error" else 6.0)
        self.latest_notice = NoticeText(message, title, severity, seconds)
        self.notice_signal.publish(self.latest_notice)

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
                    f"{counted(failed, 'audit check')} FAILED for {study_id}: see Audits (4)",
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
            self.orchestrator_loop.submit(lambda orch: raise_parallel(orch, message.parallel))
        if message.executor == "ray" and message.ray_address == "local":
            self.own_ray_studies.add(message.study_id)
        self.study_id = message.study_id
        self.refresh_queue()
        self.state_signal.publish("study")
        self.state_signal.publish("datasets")
        self.notify(f"launched study {message.study_id}", title="launch")
        self.switch_mode("runs")

    @on(Notice)
    def _notice(self, message: Notice) -> None:
        self.notify(message.text, title=message.title, severity=message.severity)  # type: ignore[arg-type]
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

    @property
    def follows_presets(self) -> bool:
        """Whether the studies' presets set how many workers run at once (no --parallel was given)."""
        return self._max_parallel is None

    def submit(self, command: Callable[[Orchestrator], str | None]) -> None:
        """Hand a command to the orchestrator loop (the only thread that may call the orchestrator)."""
        if not self.orchestrate or self.loop_done.is_set():
            self.notify("no orchestrator runs in this console", severity="error")
            return
        self.orchestrator_loop.submit(command)

    # -- launching -----------------------------------------------------------------------------------
    def offer_demo(self) -> None:
        """Launch the demo study, after a question naming what it creates (one key must not do it)."""
        from hierconsole.tui.screens.launch import launch_question

        preset = self.demo.preset
        question = launch_question(preset, preset.data.dataset, len(self.studies))

        def launch_if(yes: bool | None) -> None:
            if yes:
                self.launch_demo()

        self.push_screen(ConfirmDialog(question), launch_if)

    @work(thread=True, exclusive=True, exit_on_error=False, group="launch")
    def launch_demo(self) -> None:
        demo = self.demo
        self.post_message(Notice("importing the demo dataset and creating the study…", title="demo"))
        from hierconsole.study.commands import LaunchRequest, launch

        try:
            launched = launch(self.store, LaunchRequest(demo.preset, dataset=demo.dataset(self.store)))
        except HierconsoleError as exc:
            self.post_message(Notice(f"demo not launched: {exc}", severity="error", title="demo"))
            return
        self.post_message(StudyLaunched(launched.study_ids[0], launched.plan.parallel))

    # -- actions -------------------------------------------------------------------------------------
    def action_show_view(self, mode: str) -> None:
        if self.ready and self.current_mode != mode:
            self.switch_mode(mode)

    def action_help(self) -> None:
        from hierconsole.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        if self._quitting or isinstance(self.screen, QuitDialog):
            return
        if not self.orchestrate or self.loop_done.is_set():
            self.exit(0)
            return
        active = sum(j.state in ACTIVE_STATES for j in self.jobs)
        own_ray = sum(j.state in ACTIVE_STATES and j.study_id in self.own_ray_studies for j in self.jobs)
        if not active:
            self._stop("leave")
        elif self.on_quit == "ask":
            self.push_screen(QuitDialog(active, own_ray), self._stop)
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

