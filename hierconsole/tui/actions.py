"""The one action registry: key bindings, footer, command palette and help screen all come from `ACTIONS`.

An action runs a Textual action string (`handler`) on the node of its scope: the app for "app", else the
screen whose `SCOPE` matches. Adding a row here is all it takes to bind, show, document and search it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.types import IgnoreReturnCallbackType

VIEWS = Binding.Group("views", compact=True)


@dataclass(frozen=True)
class Action:
    id: str
    key: str
    description: str
    scope: str
    handler: str
    help: str = ""
    show: bool = True
    key_display: str | None = None
    group: Binding.Group | None = None


SCOPES: dict[str, str] = {
    "app": "Everywhere",
    "datasets": "Datasets",
    "runs": "Runs",
    "run_detail": "Run detail",
    "effects": "Effects",
    "audits": "Audits",
    "redistribution": "Redistribution",
    "export": "Export",
    "families": "Families",
    "replication": "Replication",
    "help": "Help",
    "import": "Import dialog",
    "launch": "Launch dialog",
    "confirm": "Confirmation",
    "quit": "Quit dialog",
}

VIEW_MODES: tuple[tuple[str, str], ...] = (
    ("datasets", "Datasets"),
    ("runs", "Runs"),
    ("effects", "Effects"),
    ("audits", "Audits"),
    ("redistribution", "Redistribution"),
    ("export", "Export"),
)
"""(mode, title) of the top-level views, in the order of their number keys."""

REPLICATION_VIEW = ("8", "replication", "Replication")
"""(key, mode, title) of the replication view: on the tab line after the six (7 is the families view,
off the tab line)."""

ACTIONS: tuple[Action, ...] = (
    *(
        Action(
            f"view.{mode}",
            str(i),
            title,
            "app",
            f"show_view('{mode}')",
            help=f"switch to the {title.lower()} view",
            # The tab line shows each view's number beside its title; the footer keeps its width.
            show=False,
            group=VIEWS,
        )
        for i, (mode, title) in enumerate(VIEW_MODES, start=1)
    ),
    Action(
        "view.families",
        "7",
        "families",
        "app",
        "show_view('families')",
        help="switch to the families view: members, progress and declared contrasts",
        show=False,  # off the footer and tab line, which hold six views in 80 columns
        group=VIEWS,
    ),
    Action(
        "view.replication",
        REPLICATION_VIEW[0],
        REPLICATION_VIEW[2].lower(),
        "app",
        f"show_view('{REPLICATION_VIEW[1]}')",
        help="switch to the replication view: stages, time left and the paper tables as they fill in",
        show=False,  # on the tab line, with its number
        group=VIEWS,
    ),
    Action("app.help", "question_mark", "help", "app", "help", "list every key and command", key_display="?"),
    Action("app.quit", "q", "quit", "app", "quit", "leave the console (asks what to do with running jobs)"),
    Action(
        "datasets.demo",
        "d",
        "demo",
        "datasets",
        "load_demo",
        "import the synthetic demo dataset and launch the demo study",
    ),
    Action(
        "datasets.import", "i", "import", "datasets", "import_dataset", "import a generic, CUB or NABirds set"
    ),
    Action("datasets.launch", "l", "launch", "datasets", "launch", "launch a preset on the selected dataset"),
    Action("runs.launch", "l", "launch", "runs", "launch", "launch a preset on a dataset"),
    Action(
        "runs.open", "enter", "open", "runs", "open", "make a study current / show a job's curves and log"
    ),
    Action("runs.cancel", "c", "cancel", "runs", "cancel", "cancel the selected job (it can be resumed)"),
    Action(
        "runs.resume", "r", "resume", "runs", "resume", "resume the selected crashed, cancelled or failed job"
    ),
    Action("runs.delete", "x", "delete", "runs", "delete", "delete the selected study, after confirmation"),
    Action("run_detail.back", "escape", "close", "run_detail", "back", "return to the run queue"),
    Action("effects.level", "m", "metric", "effects", "next_level", "cycle hier, the levels above the leaf, the leaf"),
    Action("effects.measure", "k", "mAP/R@K", "effects", "next_measure", "cycle mAP, R@1, R@5, R@10, R@20, then the whole tree's metrics the study scores"),
    Action(
        "effects.aggregation", "a", "aggregation", "effects", "next_aggregation", "micro / macro if re-scored"
    ),
    Action(
        "effects.report",
        "o",
        "report",
        "effects",
        "write_report",
        "write the study's report (HTML, figures inline) to HOME/reports/STUDY.html and say where",
    ),
    Action("redistribution.measure", "k", "mAP/R@K", "redistribution", "next_measure", "cycle mAP and R@K"),
    Action(
        "redistribution.aggregation",
        "a",
        "aggregation",
        "redistribution",
        "next_aggregation",
        "micro / macro if re-scored",
    ),
    Action("audits.recheck", "ctrl+r", "reload", "audits", "reload", "read the checks again", key_display="^r"),
    Action("help.close", "escape", "close", "help", "close", "close the help screen"),
    Action(
        "import.submit", "ctrl+s", "submit", "import", "submit", "check and import the files", key_display="^s"
    ),
    Action("import.cancel", "escape", "close", "import", "cancel", "close without importing"),
    Action(
        "launch.submit",
        "ctrl+s",
        "submit",
        "launch",
        "submit",
        "check, ask, then create the study and queue its jobs",
        key_display="^s",
    ),
    Action("launch.cancel", "escape", "close", "launch", "cancel", "close without launching"),
    Action("confirm.yes", "y", "yes", "confirm", "answer(True)", "go ahead"),
    Action("confirm.no", "n", "no", "confirm", "answer(False)", "keep things as they are"),
    Action("confirm.close", "escape", "close", "confirm", "answer(False)", "the same as no"),
    Action("quit.cancel", "c", "cancel", "quit", "choose('cancel')", "cancel the running jobs, then quit"),
    Action("quit.leave", "q", "quit", "quit", "choose('leave')", "quit and leave the workers running"),
    Action("quit.stay", "escape", "close", "quit", "choose(None)", "do not quit"),
    Action("families.next", "f", "next family", "families", "next_family", "show the next family"),
    Action("families.reload", "ctrl+r", "reload", "families", "reload", "read the family and its contrasts again", key_display="^r"),
    Action("replication.table", "t", "next table", "replication", "next_table", "show the next paper table's rows"),
    Action(
        "replication.table_back",
        "T",
        "previous table",
        "replication",
        "next_table(-1)",
        "show the previous paper table's rows",
        show=False,
    ),
    Action(
        "replication.next", "e", "next replication", "replication", "next_replication", "show the next replication"
    ),
    Action(
        "replication.reload",
        "ctrl+r",
        "reload",
        "replication",
        "reload",
        "read the stage records again (they are read every few seconds while shown)",
        key_display="^r",
    ),
    Action("export.write", "w", "write", "export", "write", "write the chosen table in the chosen format"),
)


def actions_for(scope: str) -> list[Action]:
    return [a for a in ACTIONS if a.scope == scope]


def bindings_for(scope: str) -> list[BindingType]:
    """The BINDINGS of the app ("app") or of the screen class whose SCOPE is `scope`."""
    return [
        Binding(
            a.key,
            a.handler,
            a.description,
            show=a.show,
            key_display=a.key_display,
            id=a.id,
            tooltip=a.help,
            group=a.group,
        )
        for a in actions_for(scope)
    ]


def key_label(action: Action) -> str:
    return action.key_display or action.key


PALETTE_HINT_WIDTH = 14
"""Cells of the footer's command palette hint ("▏^p palette")."""


def footer_width(scope: str) -> int:
    """Cells the compact footer needs for the shown keys of `scope` and the global ones."""
    shown = [a for a in (*actions_for(scope), *actions_for("app")) if a.show]
    return sum(len(key_label(a)) + len(a.description) + 2 for a in shown)


def help_rows() -> Iterator[tuple[str, str, str, str]]:
    """(scope title, key, description, help) for every action, scope by scope."""
    for scope, title in SCOPES.items():
        for a in actions_for(scope):
            yield title, key_label(a), a.description, a.help


class ActionsProvider(Provider):
    """Command palette entries for every action of every view, each with its key; choosing one from
    another view first switches to that view (dialog actions only exist inside their dialogs)."""

    def _actions(self) -> Iterator[tuple[str, str, IgnoreReturnCallbackType]]:
        here = getattr(self.screen, "SCOPE", None)
        views = {mode for mode, _ in VIEW_MODES} | {REPLICATION_VIEW[1]}
        for a in ACTIONS:
            if a.scope != "app" and a.scope != here and a.scope not in views:
                continue
            title = f"{SCOPES[a.scope]}: {a.description}  ({key_label(a)})"
            help_text = f"[{key_label(a)}] {a.help}"
            yield title, help_text, partial(self._run, a, here)

    async def _run(self, action: Action, here: str | None) -> None:
        app = self.app
        if action.scope == "app":
            await app.run_action(action.handler, app)
            return
        if action.scope != here:
            await app.switch_mode(action.scope)
        await app.run_action(action.handler, app.screen)

    async def discover(self) -> Hits:
        for title, help_text, callback in self._actions():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._actions():
            score = matcher.match(f"{title} {help_text}")
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
