"""The import dialog: generic files, a CUB-200-2011 folder or a NABirds folder, with path completion.

Importers write nothing; `import_dataset` lands a set completely or not at all, so a failed import
leaves the store as it was. Every problem the importer found is shown here, in place.

A CUB or NABirds folder without a features file can be extracted first: the dialog runs
`hierconsole extract` in a child process (torch and transformers never enter the console), follows its
`--progress json` lines, and imports the result. Closing the dialog stops it; its finished shards are
kept, so the same extraction resumes where it stopped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, RadioButton, RadioSet, Static
from textual.worker import Worker, WorkerState

from hierconsole.errors import HierconsoleError
from hierconsole.study.commands import import_dataset, read_dataset
from hierconsole.study.read import DatasetInfo
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.dialogs import FieldDialog
from hierconsole.tui.widgets.path_input import FieldInput, PathInput

KINDS = ("generic", "cub", "nabirds", "inat")
KIND_LABELS = {"generic": "generic files", "cub": "CUB-200-2011", "nabirds": "NABirds", "inat": "iNaturalist"}
FIELDS: dict[str, tuple[str, str]] = {
    "root": ("folder", "dataset folder (images.txt, ...)"),
    "features": ("features", ".npy .npz .parquet .safetensors .pt"),
    "labels": ("labels", "CSV id,leaf[,split]"),
    "taxonomy": ("taxonomy", "CSV, a column per level, leaf first"),
    "train": ("train", "iNat annotation JSON (train2021.json)"),
    "val": ("val", "iNat val JSON: the test split (or none)"),
    "levels": ("levels", "ranks to keep, finest first (default: all)"),
    "weights": ("weights", "no features yet: extract with these DINOv2 weights (a folder or file, or none)"),
    "model": ("model", "vits14, vitb14 (default), vitl14, or a Dinov2Config .json"),
}
KIND_FIELDS = {
    "generic": ("features", "labels", "taxonomy"),
    "cub": ("root", "features", "taxonomy", "weights", "model"),
    "nabirds": ("root", "features", "weights", "model"),
    "inat": ("features", "train", "val", "levels"),
}
OPTIONAL = ("weights", "model", "val", "levels")
"""Fields that may stay empty; `features` may too when `weights` asks for an extraction."""
EXTRACTED = "extracted"
"""Folder of the home where the console's extractions write their features (and resume from)."""
DEFAULT_NAMES = {"generic": "", "cub": "cub", "nabirds": "nabirds", "inat": "inat"}
NOT_PATHS = ("levels",)
"""Fields that are not files: `levels` is the iNat ranks to keep, comma-separated (`species,genus,family`)."""


@dataclass(frozen=True)
class ImportRequest:
    kind: str
    name: str
    paths: dict[str, str]

    @property
    def extracts(self) -> bool:
        """No features file, but weights to extract them with."""
        return not self.paths.get("features") and bool(self.paths.get("weights"))

    def problems(self) -> list[str]:
        optional = set(OPTIONAL) | ({"features"} if self.extracts else set())
        missing = [FIELDS[f][0] for f in KIND_FIELDS[self.kind] if f not in optional and not self.paths.get(f)]
        out = [f"{m}: give a path" for m in missing]
        if "features" in missing and "weights" in KIND_FIELDS[self.kind]:
            out[-1] = "features: give a path, or weights to extract them from the images"
        if not self.name:
            out.append("name: give the dataset a name")
        return out

    def extract_argv(self, output: Path) -> list[str]:
        """The `hierconsole extract` command that makes this request's features."""
        p = self.paths
        weights = p["weights"]
        argv = [sys.executable, "-m", "hierconsole", "extract", self.kind, p["root"], "-o", str(output)]
        argv += ["--weights", weights, "--progress", "json"]
        if weights.strip().lower() == "none":
            argv += ["--seed", "0"]
        if p.get("model"):
            argv += ["--model", p["model"]]
        return argv


class ImportDialog(FieldDialog[DatasetInfo | None]):
    SCOPE = "import"
    BINDINGS = bindings_for(SCOPE)

    @dataclass
    class Failed(Message):
        error: str

    @dataclass
    class Imported(Message):
        info: DatasetInfo

    @dataclass
    class Extracting(Message):
        done: int
        total: int
        rate: float

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
        what = "extracting features, then importing" if request.extracts else "importing"
        self.query_one("#import-error", Static).update(Text(f"{what} {request.name}…", style="dim"))
        self.run_import(request)

    def action_cancel(self) -> None:
        self._stop_extraction()
        self.dismiss(None)

    def _stop_extraction(self) -> None:
        proc = self._extraction
        if proc is not None and proc.poll() is None:
            proc.terminate()  # its finished shards stay: the same extraction resumes where it stopped

    _extraction: subprocess.Popen[str] | None = None

    @work(thread=True, exclusive=True, exit_on_error=False, group="import")
    def run_import(self, request: ImportRequest) -> None:
        store = self.app.store  # type: ignore[attr-defined]
        try:
            if request.extracts:
                extracted = self._extract(request, store.home / EXTRACTED)
                if extracted is None:
                    return
                request = extracted
            paths = {f: p for f, p in request.paths.items() if f not in NOT_PATHS and p}
            ranks = [r.strip() for r in request.paths.get("levels", "").split(",") if r.strip()]
            fs = read_dataset(request.kind, request.name, paths, levels=ranks or None)
            info = import_dataset(store, fs)
        except HierconsoleError as exc:
            self.post_message(self.Failed(str(exc)))
            return
        self.post_message(self.Imported(info))

    def _extract(self, request: ImportRequest, folder: Path) -> ImportRequest | None:
        """Run the extraction in a child process, reporting its progress; the request with the features
        file it wrote, or None (after saying why) when it failed or was stopped."""
        folder.mkdir(parents=True, exist_ok=True)
        output = folder / f"{request.name}.npz"
        output.unlink(missing_ok=True)  # an earlier, finished extraction of this name: make it anew
        proc = subprocess.Popen(
            request.extract_argv(output),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self._extraction = proc
        assert proc.stdout is not None and proc.stderr is not None
        began, first = time.monotonic(), None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            step = json.loads(line)
            first = step["done"] if first is None else first
            elapsed = max(time.monotonic() - began, 1e-9)
            self.post_message(self.Extracting(step["done"], step["total"], (step["done"] - first) / elapsed))
        errors = proc.stderr.read()
        if proc.wait() != 0:
            lines = [ln for ln in errors.splitlines() if ln.strip()]
            said = next((ln for ln in lines if ln.startswith("error:")), lines[-1] if lines else "")
            self.post_message(self.Failed(said or f"the extraction stopped (exit status {proc.returncode})"))
            return None
        return ImportRequest(request.kind, request.name, {**request.paths, "features": str(output)})

    @on(Extracting)
    def _extracting(self, message: Extracting) -> None:
        left = (message.total - message.done) / message.rate if message.rate > 0 else None
        eta = f" · eta {left:.0f} s" if left is not None else ""
        self.query_one("#import-error", Static).update(
            Text(f"extracting {message.done:,}/{message.total:,} images · {message.rate:.1f}/s{eta}", style="dim")
        )

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
