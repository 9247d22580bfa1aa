"""The launch dialog: a preset on a dataset, with the command line's overrides (epochs, seeds)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Select, Static

from hierconsole.config import list_presets, load_preset
from hierconsole.errors import HierconsoleError
from hierconsole.study.read import list_datasets
from hierconsole.tui.actions import bindings_for

PRESET_DATASET = "__preset__"


@dataclass(frozen=True)
class LaunchRequest:
    preset: str
    dataset: str | None = None
    epochs: int | None = None
    seeds: tuple[int, ...] | None = None


def parse_request(preset: str, dataset: str | None, epochs: str, seeds: str) -> LaunchRequest:
    """The request the fields describe, checked as `hierconsole run` checks its options."""
    problems = []
    n_epochs = None
    if epochs.strip():
        try:
            n_epochs = int(epochs)
        except ValueError:
            problems.append(f"epochs: {epochs!r} is not a whole number")
    seed_list = None
    if seeds.strip():
        try:
            seed_list = tuple(int(s) for s in seeds.replace(" ", "").split(",") if s)
        except ValueError:
            problems.append(f"seeds: {seeds!r} is not a comma-separated list of integers")
    if problems:
        raise HierconsoleError("\n".join(problems))
    request = LaunchRequest(
        preset, None if dataset in (None, PRESET_DATASET) else dataset, n_epochs, seed_list
    )
    # Validate the overrides the way the study will see them (ConfigError lists every problem).
    load_preset(preset).with_overrides(epochs=n_epochs, seeds=list(seed_list) if seed_list else None)
    return request


class LaunchDialog(ModalScreen[LaunchRequest | None]):
    SCOPE = "launch"
    BINDINGS = bindings_for(SCOPE)

    @dataclass
    class Choices(Message):
        presets: list[tuple[str, str]]
        datasets: list[str]

    @dataclass
    class Checked(Message):
        request: LaunchRequest | None
        error: str | None

    def __init__(self, dataset: str | None = None) -> None:
        super().__init__()
        self.dataset = dataset

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="launch"):
            yield Static(Text("Launch a study", style="bold"))
            with Horizontal(classes="field"):
                yield Label("preset", classes="field-label")
                yield Select([], prompt="loading…", id="preset", allow_blank=True, compact=True)
            with Horizontal(classes="field"):
                yield Label("dataset", classes="field-label")
                yield Select([], prompt="loading…", id="dataset", allow_blank=True, compact=True)
            with Horizontal(classes="field"):
                yield Label("epochs", classes="field-label")
                yield Input(placeholder="preset's (override: a number)", id="epochs")
            with Horizontal(classes="field"):
                yield Label("seeds", classes="field-label")
                yield Input(placeholder="preset's (override: 42,2024,...)", id="seeds")
            yield Static(id="preset-description")
            yield Static(Text("ctrl+s launches · esc closes", style="dim"))
            yield Static(id="launch-error")

    def on_mount(self) -> None:
        self.load_choices()

    @work(thread=True, exclusive=True, exit_on_error=False, group="launch-choices")
    def load_choices(self) -> None:
        store = self.app.store  # type: ignore[attr-defined]
        presets = [(name, description) for name, _, description in list_presets()]
        self.post_message(self.Choices(presets, [d.dataset_id for d in list_datasets(store)]))

    @on(Choices)
    def _choices(self, message: Choices) -> None:
        self._descriptions = dict(message.presets)
        preset = self.query_one("#preset", Select)
        preset.set_options([(name, name) for name, _ in message.presets])
        names = [name for name, _ in message.presets]
        if names:
            preset.value = "demo" if "demo" in names else names[0]
        dataset = self.query_one("#dataset", Select)
        dataset.set_options([("the preset's dataset", PRESET_DATASET), *((d, d) for d in message.datasets)])
        dataset.value = self.dataset if self.dataset in message.datasets else PRESET_DATASET
        preset.focus()

    @on(Select.Changed, "#preset")
    def _preset_changed(self, event: Select.Changed) -> None:
        description = getattr(self, "_descriptions", {}).get(event.value, "")
        self.query_one("#preset-description", Static).update(Text(description, style="dim"))

    def action_submit(self) -> None:
        preset = self.query_one("#preset", Select).value
        if preset is Select.BLANK:
            self.query_one("#launch-error", Static).update(Text("choose a preset", style="red"))
            return
        dataset = self.query_one("#dataset", Select).value
        self.check(
            str(preset),
            None if dataset is Select.BLANK else str(dataset),
            self.query_one("#epochs", Input).value,
            self.query_one("#seeds", Input).value,
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="launch-check")
    def check(self, preset: str, dataset: str | None, epochs: str, seeds: str) -> None:
        try:
            self.post_message(self.Checked(parse_request(preset, dataset, epochs, seeds), None))
        except HierconsoleError as exc:
            self.post_message(self.Checked(None, str(exc)))

    @on(Checked)
    def _checked(self, message: Checked) -> None:
        if message.request is not None:
            self.dismiss(message.request)
        else:
            self.query_one("#launch-error", Static).update(Text(message.error or "", style="red"))

    def action_cancel(self) -> None:
        self.dismiss(None)
