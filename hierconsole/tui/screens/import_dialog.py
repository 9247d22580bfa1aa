"""The import dialog: generic files, a CUB-200-2011 folder or a NABirds folder, with path completion.

Importers write nothing; `register_dataset` lands a set completely or not at all, so a failed import
leaves the store as it was. Every problem the importer found is shown here, in place.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, RadioButton, RadioSet, Static
from textual.worker import Worker, WorkerState

from hierconsole.errors import HierconsoleError
from hierconsole.study.catalog import DatasetInfo, register_dataset
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.dialogs import FieldDialog
from hierconsole.tui.widgets.path_input import FieldInput, PathInput

KINDS = ("generic", "cub", "nabirds")
KIND_LABELS = {"generic": "generic files", "cub": "CUB-200-2011", "nabirds": "NABirds"}
FIELDS: dict[str, tuple[str, str]] = {
    "root": ("folder", "dataset folder (images.txt, ...)"),
    "features": ("features", ".npy .npz .parquet .safetensors .pt"),
    "labels": ("labels", "CSV id,leaf[,split]"),
    "taxonomy": ("taxonomy", "CSV leaf,middle,high"),
}
KIND_FIELDS = {
    "generic": ("features", "labels", "taxonomy"),
    "cub": ("root", "features", "taxonomy"),
    "nabirds": ("root", "features"),
}
DEFAULT_NAMES = {"generic": "", "cub": "cub", "nabirds": "nabirds"}


@dataclass(frozen=True)
class ImportRequest:
    kind: str
    name: str
    paths: dict[str, str]

    def problems(self) -> list[str]:
        missing = [FIELDS[f][0] for f in KIND_FIELDS[self.kind] if not self.paths.get(f)]
        out = [f"{m}: give a path" for m in missing]
        if not self.name:
            out.append("name: give the dataset a name")
        return out


def import_featureset(request: ImportRequest):
    """Run the importer for the request's kind (reads files, writes nothing)."""
    p = request.paths
    if request.kind == "generic":
        from hierconsole.datasets import import_generic

        return import_generic(p["features"], p["labels"], p["taxonomy"], name=request.name)
    if request.kind == "cub":
        from hierconsole.datasets import import_cub

        return import_cub(p["root"], p["features"], p["taxonomy"], name=request.name)
    from hierconsole.datasets import import_nabirds

    return import_nabirds(p["root"], p["features"], name=request.name)


class ImportDialog(FieldDialog[DatasetInfo | None]):
    SCOPE = "import"
    BINDINGS = bindings_for(SCOPE)

    @dataclass
    class Failed(Message):
        error: str

    @dataclass
    class Imported(Message):
        info: DatasetInfo

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="import"):
            yield Static(Text("Import a dataset", style="bold"))
            with RadioSet(id="kind"):
                for i, kind in enumerate(KINDS):
                    yield RadioButton(KIND_LABELS[kind], value=i == 0, id=f"kind-{kind}")
            with Horizontal(classes="field"):
                yield Label("name", classes="field-label")
                yield FieldInput(placeholder="dataset id in the store", id="name")
            for field, (label, hint) in FIELDS.items():
                with Horizontal(classes="field", id=f"row-{field}"):
                    yield Label(label, classes="field-label")
                    yield PathInput(placeholder=hint, id=f"path-{field}")
            yield Static(
                Text("→ completes a path · ctrl+s imports · esc closes", style="dim"), id="import-hint"
            )
            yield VerticalScroll(Static(id="import-error"), id="import-errors")

    def on_mount(self) -> None:
        self._show_fields("generic")
        self.query_one("#name", Input).focus()

    @property
    def kind(self) -> str:
        pressed = self.query_one("#kind", RadioSet).pressed_index
        return KINDS[max(pressed, 0)]

    def _show_fields(self, kind: str) -> None:
        for field in FIELDS:
            self.query_one(f"#row-{field}").display = field in KIND_FIELDS[kind]
        name = self.query_one("#name", Input)
        if not name.value or name.value in DEFAULT_NAMES.values():
            name.value = DEFAULT_NAMES[kind]

    @on(RadioSet.Changed, "#kind")
    def _kind_changed(self) -> None:
        self._show_fields(self.kind)

    @on(Input.Submitted)
    def _next_field(self) -> None:
        self.focus_next()

    def request(self) -> ImportRequest:
        kind = self.kind
        return ImportRequest(
            kind,
            self.query_one("#name", Input).value.strip(),
            {f: self.query_one(f"#path-{f}", Input).value.strip() for f in KIND_FIELDS[kind]},
        )

    def _error(self, text: str) -> None:
        self.query_one("#import-error", Static).update(Text(text, style="red"))

    def action_submit(self) -> None:
        request = self.request()
        problems = request.problems()
        if problems:
            self._error("\n".join(problems))
            return
        self.query_one("#import-error", Static).update(Text(f"importing {request.name}…", style="dim"))
        self.run_import(request)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @work(thread=True, exclusive=True, exit_on_error=False, group="import")
    def run_import(self, request: ImportRequest) -> None:
        store = self.app.store  # type: ignore[attr-defined]
        try:
            info = register_dataset(store, import_featureset(request))
        except HierconsoleError as exc:
            self.post_message(self.Failed(str(exc)))
            return
        self.post_message(self.Imported(info))

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        self._error(message.error)

    @on(Imported)
    def _imported(self, message: Imported) -> None:
        self.dismiss(message.info)

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self._error(f"{type(error).__name__}: {error}")
