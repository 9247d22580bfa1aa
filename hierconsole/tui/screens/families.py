"""Families: each family's members with their phase and progress, its declared contrasts per seed,
mean ± SD, seed directions and a level-wise bar per arm pair (as the redistribution view draws them),
and an outer-split family's arms over splits and paired gains."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.containers import ScrollableContainer
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from hierconsole.errors import HierconsoleError
from hierconsole.present import numbers as fmt
from hierconsole.present.render import render
from hierconsole.present.tables.families import contrast_grid, outer_arms_grid, outer_gains_grid
from hierconsole.study.db.storage import Store
from hierconsole.study.read.contrasts import StudyContrast
from hierconsole.study.read.families import (
    FamilyRow,
    OuterArmsView,
    contrasts_so_far,
    list_families,
    outer_arms_so_far,
)
from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.base import ConsoleScreen, view_width, while_open


def members_table(family: FamilyRow) -> Table:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, show_edge=False)
    for col in ("member", "phase", "jobs", "", "overrides"):
        table.add_column(col, no_wrap=col != "overrides")
    for m in family.members:
        table.add_row(
            Text(m.member, style="bold"),
            fmt.phase(m.phase),
            f"{m.jobs_finished}/{m.jobs}",
            fmt.progress_bar(m.jobs_finished, m.jobs),
            Text(", ".join(f"{k.rsplit('.', 1)[-1]}={json.dumps(v)}" for k, v in m.overrides.items()), style="dim"),
        )
    return table


def outer_so_far(store: Store, family: FamilyRow) -> OuterArmsView | str | None:
    """An outer-split family's arms and gains, or why not (yet); None for a family without outer arms."""
    try:
        return outer_arms_so_far(store, family)
    except HierconsoleError as exc:
        return str(exc).splitlines()[0]


def family_view(
    family: FamilyRow,
    contrasts: list[tuple[str, StudyContrast | str]],
    index: int,
    count: int,
    width: int,
    outer: OuterArmsView | str | None = None,
) -> RenderableType:
    head = Text(f"{family.name}", style="bold")
    head.append(f"  {family.family_id} · {family.complete}/{len(family.members)} members complete", style="dim")
    if count > 1:
        head.append(f" · family {index + 1} of {count} (n: next)", style="dim")
    blocks: list[RenderableType] = [head, members_table(family), Text("")]
    if isinstance(outer, str):
        line = Text("arms over outer splits: ", style="bold")
        line.append(outer, style="yellow")
        blocks += [line, Text("")]
    elif outer is not None:
        blocks += [*render(outer_arms_grid(outer, ARM_DIGITS), width, boxed=False), Text("")]
        if outer.gains:
            blocks += [*render(outer_gains_grid(outer, EFFECT_DIGITS), width, boxed=False), Text("")]
    if not contrasts and outer is None:
        blocks.append(Text("this family declares no contrasts; its members are read side by side", style="dim"))
    for name, result in contrasts:
        if isinstance(result, str):
            line = Text(f"{name}: ", style="bold")
            line.append(result, style="yellow")
            blocks += [line, Text("")]
        else:
            blocks += [*render(contrast_grid(result, EFFECT_DIGITS), width, boxed=False), Text("")]
    return Group(*blocks)


class FamiliesScreen(ConsoleScreen):
    SCOPE = "families"
    BINDINGS = bindings_for(SCOPE)
    RELOAD_ON = frozenset({"queue"})

    @dataclass
    class Loaded(Message):
        families: list[FamilyRow]
        index: int
        contrasts: list[tuple[str, StudyContrast | str]]
        outer: OuterArmsView | str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.index = -1  # the newest family until the user picks another
        self._shown: FamiliesScreen.Loaded | None = None

    def compose_body(self) -> Iterable[Widget]:
        yield ScrollableContainer(Static(id="family"), id="scroll")

    def reload(self) -> None:
        self.load(self.index)

    def action_next_family(self) -> None:
        self.index += 1
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(thread=True, exclusive=True, exit_on_error=False, group="families")
    def load(self, index: int) -> None:
        store = self.console_app.store
        families = list_families(store)
        if not families:
            self.post_message(self.Loaded([], 0, []))
            return
        i = index % len(families)
        family = families[i]
        self.post_message(self.Loaded(families, i, contrasts_so_far(store, family), outer_so_far(store, family)))

    @on(Loaded)
    @while_open
    def _loaded(self, message: Loaded) -> None:
        body = self.query_one("#family", Static)
        if not message.families:
            body.update(
                Text(
                    "No family yet: run one headless, e.g. `hierconsole run nabirds-curvature-control`, or "
                    "`hierconsole sweep PRESET --grid KEY=V1,V2`.",
                    style="dim",
                )
            )
            return
        self.index = message.index
        self._shown = message
        self._show_family()

    def _show_family(self) -> None:
        message = self._shown
        if message is None or not message.families:
            return
        width = view_width(self.query_one("#scroll", ScrollableContainer), self.size.width)
        family = message.families[message.index]
        body = self.query_one("#family", Static)
        body.update(
            family_view(family, message.contrasts, message.index, len(message.families), width, message.outer)
        )

    def on_resize(self) -> None:
        self._show_family()
