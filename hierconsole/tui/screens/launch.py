"""The launch dialog: a preset on a dataset with the command line's overrides (epochs, seeds, `--set`),
and the executor its jobs run on (local worker processes, or a Ray cluster: `--executor`, `--ray-address`).

Every field is checked where it is typed: a problem is shown beside its field and the dialog stays open.
The description follows the overrides. Launching asks first, naming what it creates; the study is
created here, so a problem only the dataset reveals (too few test samples, ...) is shown in place too.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Select, Static

from hierconsole.config import Preset, list_presets, load_preset
from hierconsole.config.overrides import OptionInfo, preset_options, split_assignments
from hierconsole.errors import ConfigError, HierconsoleError
from hierconsole.plurals import counted
from hierconsole.study.commands import (
    LOCAL_RAY,
    Launched,
    LaunchProblems,
    LaunchRequest,
    executor_name,
    launch,
    launch_on,
)
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.messages import StudyLaunched
from hierconsole.tui.screens.dialogs import ConfirmDialog, FieldDialog
from hierconsole.tui.widgets.path_input import FieldInput
from hierconsole.vocabulary import EXECUTORS, Executor

if TYPE_CHECKING:
    from hierconsole.study.commands import Orchestrator

PRESET_DATASET = "__preset__"
FIELDS = ("preset", "dataset", "epochs", "seeds", "set", "executor", "address")
RAY_CREATE_SECONDS = 600.0
"""How long the dialog waits for the orchestrator to connect to Ray and create a Ray study."""
FIELD_KEYS = {"training.epochs": "epochs", "training.seeds": "seeds", "data.dataset": "dataset"}
"""Preset keys that have a field of their own; a problem with any other key belongs to `set`."""


def field_of(problem: str) -> str:
    """The field a preset problem belongs to, from the dotted key it starts with."""
    key = problem.strip().removeprefix("- ").split(" ", 1)[0].rstrip(":")
    return FIELD_KEYS.get(key, "set")


def check_fields(
    preset: str, dataset: str | None, epochs: str, seeds: str, overrides: str = "", executor: str = "", address: str = ""
) -> tuple[LaunchRequest | None, Preset | None, dict[str, list[str]]]:
    """The request the fields describe and the preset it records, or each problem under its field: the
    front door's checks (`LaunchRequest.parse`), the lines `hierconsole run` refuses the same values with."""
    problems: dict[str, list[str]] = {f: [] for f in FIELDS}
    try:
        request = LaunchRequest.parse(
            preset,
            dataset=None if dataset in (None, PRESET_DATASET) else dataset,
            epochs=epochs,
            seeds=seeds,
            overrides=overrides,
            executor=executor or None,
            address=address,
        )
        ((_, resolved),) = request.members()
    except LaunchProblems as exc:
        for p in exc.problems:
            problems[p.option if p.option in problems else "set"].append(p.line)
        return None, None, problems
    except ConfigError as exc:
        # The first line names the file; each later one is one problem with its dotted key.
        for line in str(exc).splitlines()[1:] or [str(exc)]:
            problems[field_of(line)].append(line.strip().removeprefix("- "))
        return None, None, problems
    return request, resolved, {}


def describe(preset: Preset, values: Mapping[str, object]) -> Text:
    """The preset's own line, then what this launch creates, with the overrides named."""
    t = preset.training
    text = Text(preset.study.description or preset.name, style="dim")
    text.append(
        f"\n{counted(len(t.seeds), 'seed')} {list(t.seeds)} × {counted(len(preset.cells), 'arm')} ({' '.join(preset.cells)}), "
        f"{counted(t.epochs, 'epoch')}, batch {t.batch_size}, lr {t.lr:g}"
    )
    if values:
        text.append("\noverrides: ", style="bold")
        text.append(" ".join(f"{k}={v}" for k, v in values.items()), style="yellow")
    return text


def launch_question(
    preset: Preset, dataset: str, studies_in_store: int, request: LaunchRequest | None = None
) -> str:
    t = preset.training
    there = f" The store already holds {counted(studies_in_store, 'study')}." if studies_in_store else ""
    on = ""
    if request is not None and request.workers.executor == Executor.RAY:
        address = request.workers.ray_address
        on = (
            " on a Ray instance started in this console"
            if address == LOCAL_RAY
            else f" on the Ray cluster at {address}"
        )
    return (
        f"Launch a new {preset.name!r} study on dataset {dataset}: {counted(len(t.seeds), 'seed')} × "
        f"{counted(len(preset.cells), 'arm')}, {counted(t.epochs, 'epoch')}{on}?{there}"
    )


class LaunchDialog(FieldDialog[str | None]):
    """Dismissed with the id of the study it created, or None."""

    SCOPE = "launch"
    BINDINGS = bindings_for(SCOPE)

    @dataclass
    class Choices(Message):
        presets: list[tuple[str, str]]
        datasets: list[str]

    @dataclass
    class Checked(Message):
        request: LaunchRequest | None
        problems: dict[str, list[str]]
        preset: Preset | None = None
        submit: bool = False

    @dataclass
    class Options(Message):
        options: list[OptionInfo] = field(default_factory=list)

    @dataclass
    class Created(Message):
        study_id: str | None
        parallel: int = 1
        error: str | None = None
        request: LaunchRequest | None = None

    def __init__(self, dataset: str | None = None) -> None:
        super().__init__()
        self.dataset = dataset
        self._loaded = False
        self._options_of: str | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="launch"):
            yield Static(Text("Launch a study", style="bold"))
            yield Static(Text("loading presets and datasets…", style="dim"), id="loading")
            for name, hint in (
                ("preset", ""),
                ("dataset", ""),
                ("epochs", "the preset's (a number)"),
                ("seeds", "the preset's (42,2024,...)"),
                ("set", "KEY=VALUE ... as --set (enter on an option below)"),
                ("executor", ""),
                ("address", "ray: auto, ray://HOST:PORT, HOST:PORT (empty: a local instance)"),
            ):
                with Horizontal(classes="field", id=f"row-{name}"):
                    yield Label(name, classes="field-label")
                    if name in ("preset", "dataset"):
                        yield Static(id=f"{name}-slot")
                    elif name == "executor":
                        yield Select(
                            [(e, e) for e in EXECUTORS],
                            value=_default_executor(),
                            allow_blank=False,
                            id="executor",
                            compact=True,
                        )
                    else:
                        yield FieldInput(placeholder=hint, id=name)
                yield Static(id=f"error-{name}", classes="field-error")
            yield Static(id="preset-description")
            yield DataTable(id="options", cursor_type="row", zebra_stripes=True)
            yield Static(Text("ctrl+s launches · enter on an option sets it · esc closes", style="dim"))
            yield Static(id="launch-error", classes="field-error")

    def on_mount(self) -> None:
        for name in ("preset", "dataset"):
            self.query_one(f"#row-{name}").display = False
        table = self.query_one("#options", DataTable)
        for label in ("option", "value", "allowed", "meaning"):
            table.add_column(label, key=label)
        self.load_choices()

    @work(thread=True, exclusive=True, exit_on_error=False, group="launch-choices")
    def load_choices(self) -> None:
        from hierconsole.study.read import list_datasets

        store = self.app.store  # type: ignore[attr-defined]
        presets = [(name, description) for name, _, description in list_presets()]
        self.post_message(self.Choices(presets, [d.dataset_id for d in list_datasets(store)]))

    @on(Choices)
    async def _choices(self, message: Choices) -> None:
        # The selects exist only once their options do: there is no "loading" entry to choose.
        names = [name for name, _ in message.presets]
        preset = Select(
            [(name, name) for name in names],
            value="demo" if "demo" in names else names[0],
            allow_blank=False,
            id="preset",
            compact=True,
        )
        datasets = [("the preset's dataset", PRESET_DATASET), *((d, d) for d in message.datasets)]
        dataset = Select(
            datasets,
            value=self.dataset if self.dataset in message.datasets else PRESET_DATASET,
            allow_blank=False,
            id="dataset",
            compact=True,
        )
        await self.query_one("#preset-slot").remove()
        await self.query_one("#dataset-slot").remove()
        await self.query_one("#row-preset").mount(preset)
        await self.query_one("#row-dataset").mount(dataset)
        for name in ("preset", "dataset"):
            self.query_one(f"#row-{name}").display = True
        self.query_one("#loading").display = False
        self._loaded = True
        preset.focus()
        self._recheck()

    # -- checking as the fields change -----------------------------------------------------------------
    def _values(self) -> tuple[str, str | None, str, str, str, str, str] | None:
        if not self._loaded:
            return None
        preset = self.query_one("#preset", Select).value
        dataset = self.query_one("#dataset", Select).value
        return (
            str(preset),
            None if dataset is Select.BLANK else str(dataset),
            self.query_one("#epochs", Input).value,
            self.query_one("#seeds", Input).value,
            self.query_one("#set", Input).value,
            str(self.query_one("#executor", Select).value),
            self.query_one("#address", Input).value,
        )

    @on(Select.Changed)
    @on(Input.Changed)
    def _recheck(self) -> None:
        values = self._values()
        if values is not None:
            self.check(*values, submit=False)

    @work(thread=True, exclusive=True, exit_on_error=False, group="launch-check")
    def check(
        self,
        preset: str,
        dataset: str | None,
        epochs: str,
        seeds: str,
        overrides: str,
        executor: str,
        address: str,
        *,
        submit: bool,
    ) -> None:
        request, resolved, problems = check_fields(preset, dataset, epochs, seeds, overrides, executor, address)
        self.post_message(self.Checked(request, problems, resolved, submit=submit))
        if request is None:
            return
        if self._options_of != preset:
            self._options_of = preset
            self.post_message(self.Options(preset_options(load_preset(preset))))

    @on(Options)
    def _options(self, message: Options) -> None:
        table = self.query_one("#options", DataTable)
        table.clear()
        for o in message.options:
            default = "" if o.default in (None, o.value) else f"  (default {o.default})"
            table.add_row(o.key, o.value + default, o.allowed, o.doc, key=o.key)

    @on(Checked)
    def _checked(self, message: Checked) -> None:
        for name in FIELDS:
            error = self.query_one(f"#error-{name}", Static)
            lines = message.problems.get(name, [])
            error.update(Text("\n".join(f"↳ {p}" for p in lines), style="red"))
            error.display = bool(lines)
        self.query_one("#launch-error", Static).display = False
        if message.preset is not None and message.request is not None:
            values = dict(message.request.values)
            self.query_one("#preset-description", Static).update(describe(message.preset, values))
        if message.submit and message.request is not None and message.preset is not None:
            self._confirm(message.request, message.preset)

    @on(DataTable.RowSelected, "#options")
    def _option_chosen(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        row = self.query_one("#options", DataTable).get_row(event.row_key)
        value = str(row[1]).split("  (default", 1)[0]
        field_input = self.query_one("#set", Input)
        kept = [a for a in split_assignments(field_input.value) if a.partition("=")[0].strip() != key]
        field_input.value = " ".join([*kept, f"{key}={value}"])
        field_input.focus()
        field_input.cursor_position = len(field_input.value)

    # -- launching -------------------------------------------------------------------------------------
    def action_submit(self) -> None:
        values = self._values()
        if values is None:
            return
        self.check(*values, submit=True)

    def _confirm(self, request: LaunchRequest, preset: Preset) -> None:
        studies = len(getattr(self.app, "studies", []))
        question = launch_question(preset, request.dataset or preset.data.dataset, studies, request)

        def create_if(yes: bool | None) -> None:
            if yes:
                self.create(request)

        self.app.push_screen(ConfirmDialog(question), create_if)

    @work(thread=True, exclusive=True, exit_on_error=False, group="launch-create")
    def create(self, request: LaunchRequest) -> None:
        try:
            if request.workers.executor == Executor.RAY:
                launched = self._launch_on_ray(request)
            else:
                launched = launch(self.app.store, request)  # type: ignore[attr-defined]
        except HierconsoleError as exc:
            self.post_message(self.Created(None, error=str(exc)))
            return
        (study_id,) = launched.study_ids
        self.post_message(self.Created(study_id, launched.plan.parallel, request=request))

    def _launch_on_ray(self, request: LaunchRequest) -> Launched:
        """Connect to Ray and create the study on the orchestrator's thread, the one that may touch the
        orchestrator: its jobs are handed to the Ray executor before any tick could launch them locally.
        Ray is imported there, now, and never before a Ray launch."""
        done: Future[Launched] = Future()

        def command(orch: Orchestrator) -> str | None:
            try:
                done.set_result(launch_on(orch, request))
            except HierconsoleError as exc:
                done.set_exception(exc)
            except Exception as exc:  # noqa: BLE001 - shown in the dialog, not lost in the loop
                done.set_exception(HierconsoleError(f"{type(exc).__name__}: {exc}"))
            return None

        self.app.submit(command)  # type: ignore[attr-defined]
        try:
            return done.result(timeout=RAY_CREATE_SECONDS)
        except TimeoutError:
            raise HierconsoleError(
                f"no answer from the orchestrator within {RAY_CREATE_SECONDS:.0f} s while connecting to Ray"
            ) from None

    @on(Created)
    def _created(self, message: Created) -> None:
        if message.study_id is None:
            error = self.query_one("#launch-error", Static)
            error.update(Text(f"↳ not launched: {message.error}", style="red"))
            error.display = True
            self.query_one("#launch", VerticalScroll).scroll_end(animate=False)
            return
        request = message.request
        executor = request.workers.executor if request is not None else Executor.LOCAL
        address = request.workers.ray_address if request is not None else None
        self.app.post_message(StudyLaunched(message.study_id, message.parallel, executor, address))
        self.dismiss(message.study_id)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _default_executor() -> str:
    """$HIERCONSOLE_EXECUTOR when it names an executor, else local."""
    try:
        return str(executor_name(None))
    except ConfigError:
        return str(Executor.LOCAL)
