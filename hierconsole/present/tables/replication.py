"""A replication's stage graph, its paper tables' readiness and one table's rows as `Grid`s, and the line
of its whole-pipeline progress."""

from __future__ import annotations

from rich.text import Text

from hierconsole.present import numbers
from hierconsole.present.grid import Column, Grid
from hierconsole.study.read.paper_tables import MeasuredTable
from hierconsole.study.read.replications import OMITTED, PARTIAL, READY, ReplicationView
from hierconsole.styles import ARM_DIGITS

TABLE_STYLE = {READY: "green", PARTIAL: "cyan", OMITTED: "dim"}


def progress_line(view: ReplicationView, bar: int = 20) -> Text:
    """`██░░ 9/14 stages done · 4m12s recorded · about 1m30s left`."""
    text = numbers.progress_bar(view.done, view.total, bar)
    text.append(f" {view.done}/{view.total} stages done")
    text.append(f" · {numbers.duration(view.seconds_done) or '0s'} recorded", style="dim")
    if view.done == view.total:
        return text
    if view.seconds_left is None:
        text.append(" · time left unknown (no stage timed yet)", style="dim")
    else:
        text.append(f" · about {numbers.duration(view.seconds_left) or '0s'} left")
    return text


def stages_grid(view: ReplicationView) -> Grid:
    """Each stage in the graph's order: its dataset, the stages it reads, its status, its time (recorded,
    or so far while it runs) and what it made."""
    grid = Grid(
        "stages",
        [
            Column("stage", numeric=False),
            Column("data", numeric=False, droppable=True),
            Column("reads", numeric=False, foldable=True),
            Column("state", numeric=False),
            Column("time"),
            Column("made", numeric=False, foldable=True),
        ],
    )
    prefix = f"{view.replication_id}."
    named = False
    for s in view.stages:
        made = [m.removeprefix(prefix) for m in s.made]
        named = named or any(m != n for m, n in zip(made, s.made, strict=True))
        grid.add_row(
            s.name,
            s.dataset or "",
            Text(", ".join(s.needs), style="dim") if s.needs else Text(numbers.NO_VALUE, style="dim"),
            numbers.stage(s.status),
            numbers.duration(s.seconds),
            Text(", ".join(made)),
        )
    if named:
        grid.note(f"the studies and families made are named {prefix}<as shown>")
    return grid


def tables_grid(view: ReplicationView, selected: str | None) -> Grid:
    """Each paper table: ready, partial (rows from the stages done so far), waiting or omitted, its row
    count and the stages it waits on; the selected one marked."""
    grid = Grid(
        "paper tables",
        [
            Column("", numeric=False),
            Column("table", numeric=False),
            Column("state", numeric=False),
            Column("rows"),
            Column("waits on", numeric=False, foldable=True),
        ],
        key_columns=2,
    )
    for t in view.tables:
        grid.add_row(
            Text("▶", style="bold") if t.table_id == selected else "",
            t.table_id,
            Text(t.status, style=TABLE_STYLE.get(t.status, "")),
            "" if t.rows is None else str(t.rows),
            Text(", ".join(t.waits_on) if t.waits_on else t.note, style="dim" if not t.waits_on else ""),
        )
    return grid


def table_rows_grid(table: MeasuredTable) -> Grid:
    """One table's rows: the measured value, its seed SD and count, the paper's value, the difference
    and whether the two stand to be compared (not at smoke scale)."""
    grid = Grid(
        f"{table.table_id}: {table.title}",
        [
            Column("data", numeric=False),
            Column("row", numeric=False),
            Column("column", numeric=False),
            Column("measured"),
            Column("SD"),
            Column("n"),
            Column("paper"),
            Column("difference"),
            Column("comparable", numeric=False),
        ],
        key_columns=3,
    )
    values = [v for name in ("measured", "seed_sd", "published") for v in table.frame[name].drop_nulls()]
    digits = 0 if values and all(float(v).is_integer() for v in values) else ARM_DIGITS  # a table of counts
    for r in table.frame.iter_rows(named=True):
        grid.add_row(
            r["dataset"],
            r["row"],
            r["column"],
            numbers.plain(r["measured"], digits),
            numbers.plain(r["seed_sd"], digits),
            numbers.NO_VALUE if r["n"] is None else str(r["n"]),
            numbers.plain(r["published"], digits),
            numbers.signed(r["difference"], digits),
            "yes" if r["comparable"] else "no",
        )
    return grid
