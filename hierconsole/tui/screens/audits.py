"""Audits: every fairness and leakage check with pass / FAIL / pending and its evidence."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.containers import ScrollableContainer
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from hierconsole.present.render import render
from hierconsole.present.tables.studies import audits_grid
from hierconsole.study.read import Check, current_audits
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.base import ConsoleScreen, view_width, while_open


def banner_text(checks: list[Check], recorded: bool) -> Text:
    failed = [c.name for c in checks if c.ok is False]
    pending = sum(c.ok is None for c in checks)
    if failed:
        return Text(
            f" ✗ {len(failed)} of {len(checks)} checks FAILED: {', '.join(failed)}. "
            "The arms are not comparable until these pass. ",
            style="bold white on red",
        )
    if pending:
        text = Text(
            f" {len(checks) - pending} of {len(checks)} checks pass so far, {pending} pending ",
            "black on yellow",
        )
    else:
        text = Text(f" ✓ all {len(checks)} checks pass ", style="bold black on green")
    if not recorded:
        text.append("  evaluated now; recorded when the study completes", style="dim")
    return text


def checks_view(checks: list[Check], width: int) -> Group:
    """Failed checks first, then pending, then passed; each with its evidence whole at any width."""
    ordered = sorted(checks, key=lambda c: (c.ok is not False, c.ok is not None, c.name))
    grid = audits_grid(ordered)
    grid.title = ""
    return Group(*render(grid, width, boxed=False))


class AuditsScreen(ConsoleScreen):
    SCOPE = "audits"
    BINDINGS = bindings_for(SCOPE)
    RELOAD_ON = frozenset({"study", "queue"})

    @dataclass
    class Loaded(Message):
        study_id: str | None
        checks: list[Check]
        recorded: bool

    def __init__(self) -> None:
        super().__init__()
        self._shown: AuditsScreen.Loaded | None = None

    def compose_body(self) -> Iterable[Widget]:
        yield Static(id="banner")
        yield ScrollableContainer(Static(id="checks"), id="scroll")

    def reload(self) -> None:
        self.load(self.console_app.study_id)

    def action_reload(self) -> None:
        self.reload()

    @work(thread=True, exclusive=True, exit_on_error=False, group="audits")
    def load(self, study_id: str | None) -> None:
        if study_id is None:
            self.post_message(self.Loaded(None, [], False))
            return
        checks, recorded = current_audits(self.console_app.store, study_id)
        self.post_message(self.Loaded(study_id, checks, recorded))

    @on(Loaded)
    @while_open
    def _loaded(self, message: Loaded) -> None:
        banner = self.query_one("#banner", Static)
        if message.study_id is None:
            self._shown = None
            banner.update(Text("No study yet.", style="dim"))
            self.query_one("#checks", Static).update("")
            return
        banner.set_class(any(c.ok is False for c in message.checks), "-failed")
        banner.update(banner_text(message.checks, message.recorded))
        self._shown = message
        self._show_checks()

    def _show_checks(self) -> None:
        if self._shown is None:
            return
        width = view_width(self.query_one("#scroll", ScrollableContainer), self.size.width)
        self.query_one("#checks", Static).update(checks_view(self._shown.checks, width))

    def on_resize(self) -> None:
        self._show_checks()
