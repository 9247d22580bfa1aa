"""The lines around every view: the view tabs (with failed audits flagged), the current study, and the
notice line above the footer where outcomes and errors are said (toasts would cover the view's text)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.timer import Timer
from textual.widgets import Static

from hierconsole.present import numbers as fmt
from hierconsole.tui.actions import REPLICATION_VIEW, VIEW_MODES
from hierconsole.vocabulary import ACTIVE_STATES

if TYPE_CHECKING:
    from hierconsole.tui.app import HierConsole


class _AppBound(Static):
    """Renders from the app's current state and re-renders whenever the app publishes a change."""

    @property
    def console_app(self) -> HierConsole:
        return cast("HierConsole", self.app)

    def on_mount(self) -> None:
        self.console_app.state_signal.subscribe(self, lambda _: self.refresh())


class NavBar(_AppBound):
    """The view tabs, each with its number key; titles shorten as the terminal narrows, the current
    view's last, so every number stays on the line."""

    def __init__(self, active: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.active = active

    def on_resize(self) -> None:
        self.refresh()

    def tabs(self, short: bool | frozenset[str], numbers_only: bool | frozenset[str]) -> Text:
        """`short`, `numbers_only`: every tab so, or only those of the modes named (the current view's
        title is always shown)."""
        app = self.console_app
        failed = app.failed_audits.get(app.study_id or "", 0)
        text = Text()
        tabs = [(str(i), mode, title) for i, (mode, title) in enumerate(VIEW_MODES, start=1)]
        for key, mode, title in (*tabs, REPLICATION_VIEW):
            current = mode == self.active
            style = "reverse bold" if current else ""
            bare = mode in numbers_only if isinstance(numbers_only, frozenset) else numbers_only
            shortened = bare or (mode in short if isinstance(short, frozenset) else short)
            label = SHORT_TITLES.get(mode, title) if shortened else title
            if bare and not current:
                label = ""
            text.append(f" {key} ", style=f"{style} bold" if style else "bold")
            if label:
                text.append(f"{label} ", style=style)
            if mode == "audits" and failed:
                text.append(f"✗{failed}", style="bold white on red")
                text.append(" ")
        if self.active == "families":
            # Off the tab line (80 columns hold six tabs); shown while it is the view on screen.
            text.append(" 7 ", style="reverse bold")
            text.append("Families ", style="reverse bold")
        return text

    def render(self) -> Text:
        width = self.size.width or 200
        # The replication tab shortens first: 80 columns hold the six full titles beside "8 Repl", 60 the
        # six short ones beside "8".
        replication = frozenset({REPLICATION_VIEW[1]})
        tiers: tuple[tuple[bool | frozenset[str], bool | frozenset[str]], ...] = (
            (False, False),
            (replication, False),
            (True, False),
            (True, replication),
            (True, True),
        )
        for short, numbers_only in tiers:
            text = self.tabs(short, numbers_only)
            if text.cell_len <= width:
                return text
        return text


SHORT_TITLES = {"datasets": "Data", "redistribution": "Redist", "replication": "Repl"}


@dataclass(frozen=True)
class NoticeText:
    text: str
    title: str = ""
    severity: str = "information"
    timeout: float = 6.0


class NoticeLine(_AppBound):
    """The latest notice, above the footer: it takes its own rows, so it never covers the view."""

    def on_mount(self) -> None:
        self.display = False
        self._timer: Timer | None = None
        self.console_app.notice_signal.subscribe(self, self.show)
        latest = self.console_app.latest_notice
        if latest is not None:
            self.show(latest)

    def show(self, notice: NoticeText) -> None:
        style = {"error": "bold red", "warning": "yellow"}.get(notice.severity, "")
        text = Text()
        if notice.title:
            text.append(f"{notice.title}: ", style=f"bold {style}".strip())
        text.append(notice.text, style=style)
        self.update(text)
        self.display = True
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(notice.timeout, self.clear)

    def clear(self) -> None:
        self.display = False
        self.console_app.latest_notice = None


class ContextBar(_AppBound):
    def render(self) -> Text:
        app = self.console_app
        study = app.current_study()
        if study is None:
            return Text(
                "no study yet: press d on Datasets for the demo, or l to launch a preset", style="dim"
            )
        active = sum(j.state in ACTIVE_STATES for j in app.jobs if j.study_id == study.study_id)
        text = Text("study ", style="dim")
        text.append(study.study_id, style="bold")
        text.append(f" · {study.dataset_id} · ", style="dim")
        text.append_text(fmt.phase(study.phase))
        text.append(f" · jobs {study.jobs_finished}/{study.jobs} done", style="dim")
        if active:
            text.append(f" · {active} active", style="cyan")
        return text
