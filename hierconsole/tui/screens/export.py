"""Export: pick a table and a format, write it through `hierconsole.present.export`, show where it went."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from hierconsole.errors import HierconsoleError
from hierconsole.plurals import counted
from hierconsole.present.export import FORMATS, STDOUT, export_table
from hierconsole.study.read import table_frame
from hierconsole.study.read.results import TABLES
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.base import ConsoleScreen
from hierconsole.tui.screens.dialogs import ConfirmDialog
from hierconsole.tui.widgets.path_input import PathInput

SUFFIX = {"csv": "csv", "parquet": "parquet", "json": "json", "md": "md", "latex": "tex"}


def default_path(study_id: str | None, table: str, fmt: str) -> str:
    """Relative to where the console was started, as `hierconsole export -o` paths are."""
    return f"{study_id or 'study'}-{table}.{SUFFIX[fmt]}"


class ExportScreen(ConsoleScreen):
    SCOPE = "export"
    BINDINGS = bindings_for(SCOPE)
    RELOAD_ON = frozenset({"study"})

    @dataclass
    class Written(Message):
        path: Path
        table: str
        rows: int

    @dataclass
    class Failed(Message):
        error: str
        exists: bool = False

    def __init__(self) -> None:
        super().__init__()
        self.table = "effects"
        self.fmt = "csv"
        self._path_edited = False

    def compose_body(self) -> Iterable[Widget]:
        with Horizontal(id="export-choices"):
            with Vertical(id="export-tables"):
                yield Label("table", classes="section")
                yield OptionList(*(Option(name, id=name) for name in TABLES), id="tables")
            with Vertical(id="export-formats"):
                yield Label("format", classes="section")
                yield OptionList(*(Option(name, id=name) for name in FORMATS), id="formats")
            yield Static(id="export-about")
        with Horizontal(classes="field"):
            yield Label("file", classes="field-label")
            yield PathInput(id="export-path")
        yield Static(id="export-result")

    def on_mount(self) -> None:
        if self.closing:  # built in idle time just as the console closed
            return
        self.query_one("#tables", OptionList).highlighted = list(TABLES).index(self.table)
        self.query_one("#formats", OptionList).highlighted = list(FORMATS).index(self.fmt)
        self.query_one("#tables", OptionList).focus()

    def reload(self) -> None:
        self._path_edited = False
        self._suggest_path()

    def _suggest_path(self) -> None:
        self._about()
        if not self._path_edited:
            path = self.query_one("#export-path", Input)
            with path.prevent(Input.Changed):
                path.value = default_path(self.console_app.study_id, self.table, self.fmt)

    def _about(self) -> None:
        text = Text(self.table, style="bold")
        text.append(f"\n{TABLES[self.table]}\n\n", style="")
        text.append(self.fmt, style="bold")
        text.append(f"\n{FORMATS[self.fmt]}", style="")
        self.query_one("#export-about", Static).update(text)

    @on(OptionList.OptionHighlighted, "#tables")
    def _table(self, event: OptionList.OptionHighlighted) -> None:
        self.table = event.option.id or self.table
        self._suggest_path()

    @on(OptionList.OptionHighlighted, "#formats")
    def _format(self, event: OptionList.OptionHighlighted) -> None:
        self.fmt = event.option.id or self.fmt
        self._suggest_path()

    @on(Input.Changed, "#export-path")
    def _edited(self) -> None:
        self._path_edited = True

    @on(OptionList.OptionSelected)
    @on(Input.Submitted, "#export-path")
    def _selected(self) -> None:
        self.action_write()

    def action_write(self, force: bool = False) -> None:
        study_id = self.console_app.study_id
        if study_id is None:
            self._show(Text("no study to export from yet", style="red"))
            return
        path = self.query_one("#export-path", Input).value.strip()
        if path == STDOUT:
            # Standard output is the console's own screen here: only the CLI writes tables there.
            self._show(Text("the console writes to files: give a file path (`hierconsole export -o -` prints)", style="red"))
            return
        self._show(Text(f"writing {self.table}…", style="dim"))
        self.write(self.table, self.fmt, path, study_id, force)

    @work(thread=True, exclusive=True, exit_on_error=False, group="export")
    def write(self, table: str, fmt: str, path: str, study_id: str, force: bool) -> None:
        store = self.console_app.store
        if not force and path and Path(path).expanduser().exists():
            self.post_message(self.Failed(f"{path} already exists", exists=True))
            return
        try:
            written, df = export_table(
                table,
                # export_table hands study_id back as the second argument; this one is known to be set.
                lambda name, _study: table_frame(store, name, study_id),
                path,
                fmt,
                study_id=study_id,
                force=force,
            )
        except HierconsoleError as exc:
            self.post_message(self.Failed(str(exc)))
            return
        assert written is not None  # a file path, never STDOUT (refused above)
        self.post_message(self.Written(written, table, df.height))

    @on(Written)
    def _written(self, message: Written) -> None:
        text = Text("✓ wrote ", style="bold green")
        text.append(f"table {message.table} ({counted(message.rows, 'row')}) to\n")
        text.append(str(message.path), style="bold")
        self._show(text)
        self.notify(f"wrote {message.path.name}", title="export")

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        if message.exists:
            self.app.push_screen(
                ConfirmDialog(f"{message.error}. Overwrite it?"),
                lambda yes: self.action_write(force=True) if yes else self._show(Text("not written", "dim")),
            )
            return
        self._show(Text(message.error, style="red"))

    def _show(self, text: Text) -> None:
        self.query_one("#export-result", Static).update(text)
