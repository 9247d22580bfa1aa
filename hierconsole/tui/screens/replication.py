"""Replication: each replication's stage graph (status, time, what each stage made), the whole pipeline's
progress and time left, and the paper tables filling in as their stages finish, with the selected table's
rows beside the paper's values. Re-read every few seconds while shown, so a stage that starts or ends
shows without a key."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on, work
from textual.containers import ScrollableContainer
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static

from hierconsole.present.render import render
from hierconsole.present.tables.replication import progress_line, stages_grid, table_rows_grid, tables_grid
from hierconsole.study.commands.replication_plan import (
    DATASETS,
    PAPER,
    Stage,
    calibrated_left,
    paper_stages,
    replication_scale,
)
from hierconsole.study.read.replications import REFRESH_SECONDS, ReplicationView, StageRow, replications
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.base import ConsoleScreen, view_width, while_open
from hierconsole.vocabulary import StageStatus

EMPTY = (
    "No replication in this home yet. `hierconsole replicate --cub CUB_200_2011/ --checklist CHECKLIST.csv "
    "--weights none --scale smoke` starts one (the paper's pipeline in minutes; `--scale paper` for the "
    "protocol itself); this view then shows its stages, the time left and each paper table as it fills in."
)


def replication_graph(replication_id: str, records: Mapping[str, Mapping[str, Any]]) -> Sequence[Stage]:
    """The stage graph of a replication: the paper's stages for the datasets its records name (a dataset
    added later joins the same replication); a replication of neither shows its records as they are."""
    words = {name.partition("-")[2] for name in records}
    datasets = frozenset(d for d in DATASETS if d in words)
    if not datasets:
        return [Stage(name) for name in records]
    return paper_stages(datasets)


def time_left(stages: Sequence[StageRow]) -> float | None:
    """Seconds the unfinished stages still take where the home holds no calibrated estimate (a replication
    planned elsewhere): the stages' recorded times, a stage that has none (it has not finished in this
    replication) counted at the mean of those that have, the running ones less their time so far; None
    while no stage has a recorded time."""
    finished = (StageStatus.DONE, StageStatus.STALE)
    timed = {s.name: s.seconds for s in stages if s.status in finished and s.seconds is not None}
    if not timed:
        return None
    pace = sum(timed.values()) / len(timed)
    per_stage = {s.name: timed.get(s.name, pace) for s in stages}
    unfinished = sum(per_stage[s.name] for s in stages if s.status not in finished)
    running = sum(min(s.seconds or 0.0, per_stage[s.name]) for s in stages if s.status == StageStatus.RUNNING)
    return max(0.0, unfinished - running)


def comparable(replication_id: str) -> bool:
    """Whether a replication's values stand to be compared with the paper's: at the paper's scale only
    (its id names the scale, as `replicate` builds it)."""
    return replication_scale(replication_id) == PAPER


def replication_body(
    views: Sequence[ReplicationView], index: int, selected: str | None, width: int
) -> RenderableType:
    if not views:
        return Text(EMPTY, style="dim")
    view = views[index]
    head = Text(view.replication_id, style="bold")
    if len(views) > 1:
        head.append(f"  replication {index + 1} of {len(views)} (e: next)", style="dim")
    blocks: list[RenderableType] = [head, progress_line(view), Text("")]
    blocks += [*render(stages_grid(view), width, boxed=False), Text("")]
    blocks += [*render(tables_grid(view, selected), width, boxed=False), Text("")]
    table = view.measured.get(selected or "")
    if table is not None:
        blocks += render(table_rows_grid(table), width, boxed=False)
    elif selected is not None:
        row = next((t for t in view.tables if t.table_id == selected), None)
        if row is not None:
            why = f"waits on {', '.join(row.waits_on)}" if row.waits_on else row.note or row.status
            blocks.append(Text(f"{selected}: {row.title} — {why} (t: next table)", style="dim"))
    return Group(*blocks)


def default_table(view: ReplicationView) -> str | None:
    """The first table with rows so far, else the first table."""
    with_rows = [t.table_id for t in view.tables if t.table_id in view.measured]
    return with_rows[0] if with_rows else (view.tables[0].table_id if view.tables else None)


class ReplicationScreen(ConsoleScreen):
    SCOPE = "replication"
    BINDINGS = bindings_for(SCOPE)
    RELOAD_ON = frozenset({"queue"})
    REFRESH_SECONDS: ClassVar[float] = REFRESH_SECONDS
    """How often the records are read again while this view shows: as often as a holder in another
    process publishes its live snapshot."""
    clock: Callable[[], float] = staticmethod(time.time)
    """The reader's clock (Unix seconds) for a running stage's time so far; fixed in snapshot tests."""

    @dataclass
    class Loaded(Message):
        views: list[ReplicationView]

    def __init__(self) -> None:
        super().__init__()
        self.views: list[ReplicationView] = []
        self.index = 0
        self.selected: str | None = None
        self._timer: Timer | None = None

    def compose_body(self) -> Iterable[Widget]:
        yield ScrollableContainer(Static(id="replication"), id="scroll")

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        if self._timer is None:
            self._timer = self.set_interval(self.REFRESH_SECONDS, self._tick)
        else:
            self._timer.resume()

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def _tick(self) -> None:
        # A read slower than the interval (a loaded machine, the tables' first read) is let finish: a new
        # one would cancel it, and none would ever complete.
        if not any(w.group == "replication" and not w.is_finished for w in self.app.workers):
            self.reload()

    def reload(self) -> None:
        self.load(list(self.views))

    @work(thread=True, exclusive=True, exit_on_error=False, group="replication")
    def load(self, kept: list[ReplicationView]) -> None:
        views = replications(
            self.console_app.store, replication_graph, time_left, comparable, self.clock(), kept, calibrated_left
        )
        self.post_message(self.Loaded(views))

    @on(Loaded)
    @while_open
    def _loaded(self, message: Loaded) -> None:
        self.views = message.views
        if self.views:
            self.index %= len(self.views)
            ids = [t.table_id for t in self.views[self.index].tables]
            if self.selected not in ids:
                self.selected = default_table(self.views[self.index])
        self._show()

    def _show(self) -> None:
        width = view_width(self.query_one("#scroll", ScrollableContainer), self.size.width)
        self.query_one("#replication", Static).update(replication_body(self.views, self.index, self.selected, width))

    def on_resize(self) -> None:
        self._show()

    # -- actions --------------------------------------------------------------------------------------
    def action_next_table(self, step: int = 1) -> None:
        if not self.views:
            return
        ids = [t.table_id for t in self.views[self.index].tables]
        if ids:
            at = ids.index(self.selected) if self.selected in ids else -step
            self.selected = ids[(at + step) % len(ids)]
            self._show()

    def action_next_replication(self) -> None:
        if self.views:
            self.index = (self.index + 1) % len(self.views)
            self.selected = default_table(self.views[self.index])
            self._show()

    def action_reload(self) -> None:
        self.reload()
