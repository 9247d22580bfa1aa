"""Run detail: one job's loss curves per cell, live, and its event log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.message import Message
from textual.widget import Widget
from textual.widgets import RichLog, Static

from hierconsole.present import numbers as fmt
from hierconsole.study.read import EventRow, job_events, loss_curves
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.messages import JobEvents
from hierconsole.tui.screens.base import ConsoleScreen, while_open
from hierconsole.tui.widgets.live import LossPlots, describe

LOG_LINES = 400
"""The newest events a job's log keeps; older ones scroll out (the store keeps them all)."""


class RunDetailScreen(ConsoleScreen):
    SCOPE = "run_detail"
    BINDINGS = bindings_for(SCOPE)
    RELOAD_ON = frozenset({"queue"})

    @dataclass
    class Loaded(Message):
        curves: dict[str, list[tuple[int, float]]]
        events: list[EventRow]

    def __init__(self, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id
        self._last_event = 0
        """The number of the newest event in the log: the next load asks only for later ones."""

    def compose_body(self) -> Iterable[Widget]:
        yield Static(id="job-title")
        yield LossPlots(id="plots")
        yield RichLog(id="log", max_lines=LOG_LINES, wrap=False, auto_scroll=True)

    def reload(self) -> None:
        self._title()
        self.load()

    def _state_changed(self, what: str) -> None:
        # Only the title follows the queue; curves and log follow this job's own events.
        if what == "queue" and self.is_current:
            self._title()

    def _events(self, message: JobEvents) -> None:
        if message.job_id == self.job_id:
            self.mark_stale()

    def _title(self) -> None:
        job = next((j for j in self.console_app.jobs if j.job_id == self.job_id), None)
        text = Text(self.job_id, style="bold")
        if job is not None:
            text.append("  ")
            text.append_text(fmt.state(job.state))
            text.append(f"  {job.done}/{job.total}", style="dim")
            if job.eta_seconds is not None:
                text.append(f"  ETA {fmt.duration(job.eta_seconds)}", style="dim")
        self.query_one("#job-title", Static).update(text)

    @work(thread=True, exclusive=True, exit_on_error=False, group="run-detail")
    def load(self) -> None:
        store = self.console_app.store
        events = job_events(store, self.job_id, limit=LOG_LINES, after=self._last_event)
        self.post_message(self.Loaded(loss_curves(store, self.job_id), events))

    @on(Loaded)
    @while_open
    def _loaded(self, message: Loaded) -> None:
        self.query_one(LossPlots).show(message.curves)
        log = self.query_one(RichLog)
        for event in message.events:
            if event.number > self._last_event:  # a load that crossed another is not shown twice
                log.write(describe(event))
                self._last_event = event.number

    def action_back(self) -> None:
        self.app.pop_screen()
