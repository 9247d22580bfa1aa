"""Run a replication's stage graph against the store: each stage's record is written when it starts
(running) and when it ends (done, with its outputs' hashes and wall time), so an interrupted run leaves a
stage that the next run starts again, and a finished one is never redone.

The stages' work is the caller's: ``actions`` maps a stage name to a function that takes the outputs of
its upstream stages and returns its own outputs (name -> content hash). That keeps this loop one
definition for the CLI and the tests.

Stages run as soon as their inputs exist, up to ``at_once`` of them, each in a thread of its own (it calls
the project's verbs in this process, or waits on the extraction's child process). The store has one writer
at a time and a stage's own verbs (`run`, `import`) write it, so the stages that open the store
(``Stage.store``) run one after another, and the others (an extraction, a taxonomy file) run beside them:
NABirds' extraction goes on while CUB's studies train. This process opens the store only while no such stage runs: a record written
meanwhile is held in memory and written as soon as the store is free again (a kill loses at most that
record, and its stage is then run again, which finds its finished output and does nothing else).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

from hierconsole.study.db.replications import put_stage, stage_rows
from hierconsole.study.db.storage import Store
from hierconsole.study.replication.graph import (
    Decision,
    Planned,
    Stage,
    StageRecord,
    StageState,
    dependents,
    plan,
    runnable,
)

StageAction = Callable[[Mapping[str, Mapping[str, str]]], Mapping[str, str]]
"""upstream stage -> its outputs, in; this stage's outputs (name -> content hash), out."""


def load_records(store: Store, replication_id: str) -> dict[str, StageRecord]:
    return {
        stage: StageRecord(StageState(row["state"]), row["input_key"], row["outputs"], row["seconds"])
        for stage, row in stage_rows(store, replication_id).items()
    }


@dataclass(frozen=True)
class Outcome:
    ran: tuple[str, ...]
    """Stages that ran in this call, in order."""
    stale: tuple[str, ...]
    """Stages whose inputs changed and that were kept (name them with --redo to re-run them)."""
    planned: tuple[Planned, ...]
    """The final plan, after the run."""


StoreOpener = Callable[[], AbstractContextManager[Store]]
"""Opens the store for one read or write and closes it after (e.g. ``lambda: Store(home)``)."""


def run_replication(
    open_store: StoreOpener,
    replication_id: str,
    stages: Iterable[Stage],
    external: Mapping[str, str],
    actions: Mapping[str, StageAction],
    redo: Iterable[str] = (),
    on_stage: Callable[[str, bool], None] | None = None,
    at_once: int = 1,
    on_failure: Callable[[], None] | None = None,
    timed: Callable[[str], bool] | None = None,
) -> Outcome:
    """Run every stage the plan says to run, as their inputs allow, until none is left.

    ``redo`` names stages to re-run together with everything downstream of them. ``on_stage`` hears each
    start and end, in this thread. A stage that raises is recorded failed; no further stage starts,
    ``on_failure`` is called (to stop the stages still running, which then fail too), and once every
    running stage has ended the first error propagates. ``timed(stage)`` says whether a finished stage's
    time measured its work; when it did none (it found its outputs made and kept them, as a `--redo` of
    unchanged inputs does) its last measured time stays on the record, which is what estimates read."""
    if at_once < 1:
        raise ValueError(f"at_once must be at least 1, not {at_once}")
    graph = list(stages)
    names = {s.name for s in graph}
    unknown = sorted(set(redo) - names)
    if unknown:
        raise ValueError(
            f"--redo names {unknown}, which are not stages of this replication ({sorted(names)})"
        )
    forced = dependents(graph, redo)
    with open_store() as store:
        records = load_records(store, replication_id)
    ledger = _Ledger(open_store, replication_id, records)
    running: dict[str, Stage] = {}
    ended: queue.Queue[tuple[str, Mapping[str, str] | BaseException, float]] = queue.Queue()
    ran: list[str] = []
    failure: BaseException | None = None

    def work(name: str, upstream: Mapping[str, Mapping[str, str]]) -> None:
        started = time.perf_counter()
        try:
            result: Mapping[str, str] | BaseException = dict(actions[name](upstream))
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, which records and re-raises it
            result = exc
        ended.put((name, result, time.perf_counter() - started))

    while True:
        planned = plan(graph, external, records, forced)
        if failure is None:
            for step in runnable(planned):
                stage = step.stage
                if stage.name in running or len(running) >= at_once:
                    continue
                if stage.store and _busy(running):
                    continue
                assert step.key is not None  # RUN is decided only once every input exists
                # Written (the store is free if this stage needs it) before the stage is running.
                # The last finished run's time stays on the record while it runs again: the estimate's measure.
                last = records[stage.name].seconds if stage.name in records else None
                running_record = StageRecord(StageState.RUNNING, step.key, {}, last)
                ledger.put(stage.name, running_record, store_free=not _busy(running))
                running[stage.name] = stage
                if on_stage is not None:
                    on_stage(stage.name, False)
                upstream = {n: records[n].outputs for n in stage.needs}
                # A daemon thread: an interrupted replication exits without waiting for it (its child
                # commands die with this process).
                threading.Thread(target=work, args=(stage.name, upstream), name=stage.name, daemon=True).start()
        if not running:
            break
        name, result, seconds = _next(ended)
        stage = running.pop(name)
        key, last = records[name].input_key, records[name].seconds
        if isinstance(result, BaseException):
            ledger.put(name, StageRecord(StageState.FAILED, key, {}, last), store_free=not _busy(running))
            if failure is None:
                failure = result
                if on_failure is not None and running:
                    on_failure()
            continue
        took = seconds if timed is None or timed(name) else last
        ledger.put(name, StageRecord(StageState.DONE, key, result, took), store_free=not _busy(running))
        forced.discard(name)
        ran.append(name)
        if on_stage is not None:
            on_stage(name, True)
    ledger.flush()
    if failure is not None:
        raise failure
    stale = tuple(p.stage.name for p in planned if p.decision == Decision.STALE)
    return Outcome(tuple(ran), stale, tuple(planned))


def _busy(running: Mapping[str, Stage]) -> bool:
    """Whether a running stage holds (or may hold) the store."""
    return any(s.store for s in running.values())


def _next(ended: queue.Queue[tuple[str, Mapping[str, str] | BaseException, float]]) -> tuple[str, Mapping[str, str] | BaseException, float]:
    # A timeout keeps the wait interruptible by Ctrl-C and SIGTERM on every platform.
    while True:
        try:
            return ended.get(timeout=0.5)
        except queue.Empty:
            continue


class _Ledger:
    """The stage records: ``records`` (kept current in memory, the loop's truth) and the store, written
    whenever the store is free and held until then."""

    def __init__(self, open_store: StoreOpener, replication_id: str, records: dict[str, StageRecord]) -> None:
        self.open_store = open_store
        self.replication_id = replication_id
        self.records = records
        self.held: dict[str, StageRecord] = {}

    def put(self, name: str, record: StageRecord, store_free: bool) -> None:
        self.records[name] = record
        self.held[name] = record
        if store_free:
            self.flush()

    def flush(self) -> None:
        if not self.held:
            return
        with self.open_store() as store:
            for name, r in self.held.items():
                put_stage(store, self.replication_id, name, r.state, r.input_key, r.outputs, r.seconds)
        self.held.clear()
