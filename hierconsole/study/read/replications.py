"""A replication as the console shows it: each stage of its graph with its status, time and what it made,
the whole pipeline's progress and time left, and each paper table's readiness with its rows so far.

Read from the stage records `replicate` writes (`study.db.replications`); the graph (which stages exist
and what each reads) and the time-left estimate are the replication room's, handed in by the caller, since
the read layer sits below that room and never imports it. A table's rows come from
`paper_tables.measured_table`, the function the `tables` stage writes its files with, so the console never
computes a table a second way.

What the records cannot say: an input changed on disk (an image, the checklist) shows only once
`replicate` (or `replicate --dry-run`) hashes the inputs again; here a finished stage is stale when a
stage it reads has run again since it finished.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hierconsole.errors import HierconsoleError
from hierconsole.study.db.live import (
    REFRESH_SECONDS as REFRESH_SECONDS,  # how often the console's view reads again
)
from hierconsole.study.db.replications import all_stage_rows
from hierconsole.study.db.storage import Store
from hierconsole.study.read.paper_tables import TABLES, MeasuredTable, TableSpec, measured_table
from hierconsole.vocabulary import StageStatus

HASH_LENGTH = 64
"""A sha256 in hex: an output recorded as a content hash (a file) rather than an id (a study, a dataset)."""


class GraphStage(Protocol):
    """What the view reads of a stage of the graph (`study.replication.graph.Stage`)."""

    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class StageRow:
    name: str
    dataset: str | None
    """The dataset a per-dataset stage works on (`factorial-cub` -> cub); None for tables and report."""
    needs: tuple[str, ...]
    status: StageStatus
    seconds: float | None
    """The recorded wall time of a finished stage, the time so far of a running one; None otherwise."""
    made: tuple[str, ...]
    """What it recorded: the studies, families or dataset it made (by id), its files (by name)."""
    input_key: str | None
    outputs: Mapping[str, str]


@dataclass(frozen=True)
class TableRow:
    table_id: str
    title: str
    status: str
    """ready (every stage it reads is done), partial (some are), waiting (none yet), omitted (its dataset
    is not in this replication, or its stages made no rows)."""
    waits_on: tuple[str, ...]
    rows: int | None
    note: str = ""


READY, PARTIAL, WAITING, OMITTED = "ready", "partial", "waiting", "omitted"
TABLE_STATES = (READY, PARTIAL, WAITING, OMITTED)


@dataclass(frozen=True)
class ReplicationView:
    replication_id: str
    stages: tuple[StageRow, ...]
    seconds_left: float | None
    """The estimate of the time the unfinished stages still take; None when nothing says yet."""
    tables: tuple[TableRow, ...]
    measured: Mapping[str, MeasuredTable]
    """Each table with rows so far, by id."""
    tables_key: str = ""
    """`tables_key` of the stages the tables were read from."""

    @property
    def done(self) -> int:
        return sum(s.status in (StageStatus.DONE, StageStatus.STALE) for s in self.stages)

    @property
    def total(self) -> int:
        return len(self.stages)

    @property
    def seconds_done(self) -> float:
        return sum(s.seconds or 0.0 for s in self.stages if s.status in (StageStatus.DONE, StageStatus.STALE))


Estimate = Callable[[Sequence[StageRow]], float | None]
"""The stages as they stand -> seconds left (the replication room's estimate, handed in by the front end)."""
Graph = Callable[[str, Mapping[str, Mapping[str, Any]]], Sequence[GraphStage]]
"""(replication id, its stage records) -> the replication's stage graph."""


def replication_records(store: Store) -> dict[str, dict[str, dict[str, Any]]]:
    """replication -> stage -> its record, for every replication in the home (none: an empty dict)."""
    return all_stage_rows(store)


def stage_rows(
    graph: Sequence[GraphStage], records: Mapping[str, Mapping[str, Any]], now: float
) -> tuple[StageRow, ...]:
    """Each stage of the graph, in its order, with its status from the records (`now`: the reader's clock,
    in Unix seconds, for a running stage's time so far)."""
    status: dict[str, StageStatus] = {}
    rows: list[StageRow] = []
    for stage in graph:
        record = records.get(stage.name)
        state = StageStatus(record["state"]) if record is not None else StageStatus.PENDING
        if record is not None and state == StageStatus.DONE and _reads_newer(stage, record, records, status):
            state = StageStatus.STALE
        status[stage.name] = state
        seconds = None
        if record is not None and state in (StageStatus.DONE, StageStatus.STALE):
            seconds = record["seconds"]
        elif record is not None and state == StageStatus.RUNNING:
            seconds = max(0.0, now - record["updated_at"])
        outputs = dict(record["outputs"]) if record is not None else {}
        rows.append(
            StageRow(
                stage.name,
                stage.name.partition("-")[2] or None,
                tuple(stage.needs),
                state,
                seconds,
                made(outputs) if state in (StageStatus.DONE, StageStatus.STALE) else (),
                record["input_key"] if record is not None else None,
                outputs,
            )
        )
    return tuple(rows)


def _reads_newer(
    stage: GraphStage,
    record: Mapping[str, Any],
    records: Mapping[str, Mapping[str, Any]],
    status: Mapping[str, StageStatus],
) -> bool:
    """A finished stage whose inputs may have changed: a stage it reads is stale, or has a record newer
    than its own (it ran again, or runs again now, after this one finished)."""
    for need in stage.needs:
        if status.get(need) == StageStatus.STALE:
            return True
        upstream = records.get(need)
        if upstream is not None and upstream["updated_at"] > record["updated_at"]:
            return True
    return False


def made(outputs: Mapping[str, str]) -> tuple[str, ...]:
    """What a stage's outputs name: ids as they are (a study, a family, a dataset), content hashes by the
    name of what was hashed (its files), a long list of files as their count."""
    ids = tuple(value for value in outputs.values() if not _is_hash(value))
    files = tuple(name for name, value in outputs.items() if _is_hash(value))
    if len(files) > 3:
        files = (f"{len(files)} files",)
    return ids + files


def _is_hash(value: str) -> bool:
    return len(value) == HASH_LENGTH and all(c in "0123456789abcdef" for c in value)


def done_outputs(stages: Sequence[StageRow]) -> dict[str, Mapping[str, str]]:
    """The outputs of the finished stages (stale ones too: their studies exist) — what tables read."""
    return {s.name: s.outputs for s in stages if s.status in (StageStatus.DONE, StageStatus.STALE)}


def tables_key(stages: Sequence[StageRow]) -> str:
    """Changes exactly when the tables' inputs do (a stage finishing, or finishing again): a front end
    keeps the measured tables while this stays the same."""
    return json.dumps(sorted((name, dict(out)) for name, out in done_outputs(stages).items()))


def table_rows(
    store: Store, stages: Sequence[StageRow], *, comparable: bool
) -> tuple[tuple[TableRow, ...], dict[str, MeasuredTable]]:
    """Each paper table's readiness, and the tables with rows so far (from the finished stages' studies)."""
    by_name = {s.name: s for s in stages}
    outputs = done_outputs(stages)
    rows: list[TableRow] = []
    measured: dict[str, MeasuredTable] = {}
    for spec in TABLES:
        rows.append(_table_row(store, spec, by_name, outputs, comparable, measured))
    return tuple(rows), measured


def _table_row(
    store: Store,
    spec: TableSpec,
    stages: Mapping[str, StageRow],
    outputs: Mapping[str, Mapping[str, str]],
    comparable: bool,
    measured: dict[str, MeasuredTable],
) -> TableRow:
    reads = [name for name in spec.reads if name in stages]
    if not reads:
        return TableRow(spec.table_id, spec.title, OMITTED, (), None, f"needs {', '.join(spec.reads)}")
    waits = tuple(name for name in reads if name not in outputs)
    if len(waits) == len(reads):
        return TableRow(spec.table_id, spec.title, WAITING, waits, None)
    try:
        table = measured_table(store, spec, outputs, comparable=comparable)
    except HierconsoleError as exc:  # a study of a finished stage deleted since: said, the others shown
        return TableRow(spec.table_id, spec.title, OMITTED, waits, None, str(exc).splitlines()[0])
    if isinstance(table, str):
        note = "" if waits else "its stages' studies hold no rows for it"
        return TableRow(spec.table_id, spec.title, WAITING if waits else OMITTED, waits, None, note)
    measured[spec.table_id] = table
    return TableRow(spec.table_id, spec.title, PARTIAL if waits else READY, waits, table.frame.height)


def replications(
    store: Store,
    graph: Graph,
    estimate: Estimate,
    comparable: Callable[[str], bool],
    now: float,
    kept: Sequence[ReplicationView] = (),
    calibrated: Callable[[Store, str], float | None] = lambda store, rid: None,
) -> list[ReplicationView]:
    """Every replication in the home, by id. `graph` gives each its stage graph, `estimate` its time
    left where `calibrated` (the replication room's estimate) has none for it, `comparable` whether its values stand to be compared with the paper's (not at smoke scale);
    `now` is the reader's clock (Unix seconds). The tables of a view in `kept` whose inputs are unchanged
    are kept rather than read again (a live refresh then costs only the stage records)."""
    previous = {v.replication_id: v for v in kept}
    views: list[ReplicationView] = []
    for rid, records in replication_records(store).items():
        stages = stage_rows(graph(rid, records), records, now)
        key = tables_key(stages)
        old = previous.get(rid)
        if old is not None and old.tables_key == key:
            rows, measured = old.tables, old.measured
        else:
            rows, measured = table_rows(store, stages, comparable=comparable(rid))
        # The calibrated estimate `replicate` prints, where this home holds one; else the caller's.
        left = calibrated(store, rid)
        left = left if left is not None else estimate(stages)
        views.append(ReplicationView(rid, stages, left, rows, measured, key))
    return views
