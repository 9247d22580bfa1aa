"""Help: every key and command, generated from the action registry."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from hierconsole.tui.actions import bindings_for, help_rows


def help_table() -> Table:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, show_edge=False, expand=True)
    table.add_column("where", no_wrap=True, style="dim")
    table.add_column("key", no_wrap=True, style="bold")
    table.add_column("action", no_wrap=True)
    table.add_column("what it does", ratio=1)
    previous = None
    for scope, key, description, text in help_rows():
        table.add_row(scope if scope != previous else "", key, description, text)
        previous = scope
    return table


class HelpScreen(Screen):
    SCOPE = "help"
    BINDINGS = bindings_for(SCOPE)

    def compose(self) -> ComposeResult:
        home = getattr(self.app, "home_label", "")
        yield Static(Text.assemble(("hierconsole", "bold"), "  store: ", (home, "dim")), id="help-title")
        yield VerticalScroll(
            Static(help_table()),
            Static(
                Text(
                    "ctrl+p opens the command palette: every action above, searchable. "
                    "Arrows move in tables, tab moves between them.",
                    style="dim",
                )
            ),
            id="help-body",
        )
        yield Footer(compact=True)

    def action_close(self) -> None:
        self.app.pop_screen()
