"""The two lines above every view: the view tabs (with failed audits flagged) and the current study."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.widgets import Static

from hierconsole.tui import format as fmt
from hierconsole.tui.actions import VIEW_MODES
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
    def __init__(self, active: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.active = active

    def render(self) -> Text:
        app = self.console_app
        failed = app.failed_audits.get(app.study_id or "", 0)
        text = Text()
        for i, (mode, title) in enumerate(VIEW_MODES, start=1):
            style = "reverse bold" if mode == self.active else ""
            text.append(f" {i} ", style=f"{style} bold" if style else "bold")
            text.append(f"{title} ", style=style)
            if mode == "audits" and failed:
                text.append(f"✗{failed}", style="bold white on red")
                text.append(" ")
        if self.active == "families":
            # Off the tab line (80 columns hold six tabs); shown while it is the view on screen.
            text.append(" 7 ", style="reverse bold")
            text.append("Families ", style="reverse bold")
        return text


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
