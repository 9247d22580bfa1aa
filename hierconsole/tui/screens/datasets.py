"""Datasets: what the store holds, each taxonomy's summary and validation, import, demo, launch."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Static

from hierconsole.present.levels import dataset_level_counts, span
from hierconsole.study.read import DatasetInfo, list_datasets, taxonomy_lines
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.base import ConsoleScreen, while_open
from hierconsole.tui.widgets.table_sync import highlighted_key, sync_rows

VALIDATION_NOTE = "validation: 0 conflicts (one middle per leaf, one high per middle, no empty names)"
VALIDATION_NOTE_ANY_DEPTH = "validation: 0 conflicts (one parent per node at every level, no empty names)"
LEVELS_HEADER = "leaf/mid/high"
DEEP_LEVELS_HEADER = "groups/level"
"""The counts column's header: three levels' own, or `K · leaf→top` where a deeper tree is listed."""


def welcome_text(preset_name: str, description: str) -> Group:
    keys = Table.grid(padding=(0, 2))
    keys.add_column(no_wrap=True)
    keys.add_column()
    keys.add_row(
        Text(" d ", style="bold reverse"),
        Text.assemble(
            (f"load the synthetic demo dataset and launch the {preset_name} study\n", "bold"),
            (description, "dim"),
        ),
    )
    keys.add_row(
        Text(" i ", style="bold reverse"),
        "import your own features (generic files, a CUB-200-2011 or a NABirds folder)",
    )
    keys.add_row(Text(" ? ", style="bold reverse"), "every key and command")
    return Group(Text("This store is empty.\n", style="bold"), keys)


def dataset_cells(d: DatasetInfo) -> list:
    return [
        d.dataset_id,
        d.kind,
        f"{d.n_samples:,}",
        str(d.dim),
        level_counts_cell(d),
        f"{d.n_train}/{d.n_val}/{d.n_test}",
    ]


def level_counts_cell(d: DatasetInfo) -> str:
    """Groups per level: `200/122/37` for three levels (or two), `7 · 10000→3` (depth · leaf→top) deeper,
    so the column keeps its width whatever the depth (the detail pane lists every level)."""
    counts = [str(c) for c in dataset_level_counts(d)]
    return span(counts) if len(counts) <= 3 else f"{len(counts)} · {span(counts)}"


class DatasetsScreen(ConsoleScreen):
    SCOPE = "datasets"
    BINDINGS = bindings_for(SCOPE)
    RELOAD_ON = frozenset({"datasets"})

    @dataclass
    class Loaded(Message):
        datasets: list[DatasetInfo]

    @dataclass
    class Summary(Message):
        dataset_id: str
        lines: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.datasets: list[DatasetInfo] = []

    def compose_body(self) -> Iterable[Widget]:
        yield Static(id="welcome")
        yield DataTable(id="datasets", cursor_type="row")
        yield Static(id="taxonomy")

    def on_mount(self) -> None:
        table = self.query_one("#datasets", DataTable)
        for label, key in (
            ("dataset", "id"),
            ("kind", "kind"),
            ("samples", "n"),
            ("dim", "dim"),
            (LEVELS_HEADER, "levels"),
            ("train/val/test", "splits"),
        ):
            table.add_column(label, key=key)

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="datasets")
    def load(self) -> None:
        self.post_message(self.Loaded(list_datasets(self.console_app.store)))

    @on(Loaded)
    @while_open
    def _loaded(self, message: Loaded) -> None:
        self.datasets = message.datasets
        empty = not self.datasets and not self.console_app.studies
        welcome = self.query_one("#welcome", Static)
        welcome.display = empty
        if empty:
            preset = self.console_app.demo.preset
            welcome.update(welcome_text(preset.name, preset.study.description))
        table = self.query_one("#datasets", DataTable)
        table.display = bool(self.datasets)
        deep = any(len(d.level_names) != 3 for d in self.datasets)
        header = DEEP_LEVELS_HEADER if deep else LEVELS_HEADER
        column = table.columns.get("levels")  # type: ignore[call-overload]
        if column is not None and column.label.plain != header:
            column.label = Text(header)
            table.refresh()
        sync_rows(table, [(d.dataset_id, dataset_cells(d)) for d in self.datasets])
        if self.datasets:
            table.focus()
            self._summarise()

    @on(DataTable.RowHighlighted, "#datasets")
    def _summarise(self) -> None:
        key = highlighted_key(self.query_one("#datasets", DataTable))
        if key is not None:
            self.summarise(key)

    @work(thread=True, exclusive=True, exit_on_error=False, group="taxonomy")
    def summarise(self, dataset_id: str) -> None:
        self.post_message(self.Summary(dataset_id, taxonomy_lines(self.console_app.store, dataset_id)))

    @on(Summary)
    def _summary(self, message: Summary) -> None:
        info = next((d for d in self.datasets if d.dataset_id == message.dataset_id), None)
        names = "/".join(info.level_names) if info else ""
        text = Text(f"{message.dataset_id} taxonomy ({names})\n", style="bold")
        for line in message.lines:
            text.append(f"  {line}\n", style="yellow" if line.startswith("warning") else "")
        three = info is None or len(info.level_names) == 3
        if info is not None and not three:  # every level's group count, which the table's column abridges
            counts = dataset_level_counts(info)
            text.append("  groups per level: ", style="dim")
            text.append(", ".join(f"{n} {c:,}" for n, c in zip(info.level_names, counts, strict=True)) + "\n")
        text.append(f"  {VALIDATION_NOTE if three else VALIDATION_NOTE_ANY_DEPTH}", style="green")
        self.query_one("#taxonomy", Static).update(text)

    # -- actions --------------------------------------------------------------------------------------
    def action_load_demo(self) -> None:
        self.console_app.offer_demo()

    def action_import_dataset(self) -> None:
        from hierconsole.tui.screens.import_dialog import ImportDialog

        self.app.push_screen(ImportDialog(), self._imported)

    def _imported(self, info: DatasetInfo | None) -> None:
        if info is not None:
            self.notify(
                f"imported {info.dataset_id}: {info.n_samples:,} samples x {info.dim}-D", title="import"
            )
            self.reload()

    def action_launch(self) -> None:
        key = highlighted_key(self.query_one("#datasets", DataTable))
        from hierconsole.tui.screens.launch import LaunchDialog

        self.app.push_screen(LaunchDialog(dataset=key))
