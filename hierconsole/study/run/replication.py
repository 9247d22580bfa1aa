"""Run a replication's stage graph against the store: each stage's record is written before it starts
(running) and when it ends (done, with its outputs' hashes and wall time), so an interrupted run leaves a
stage that the next run starts again, and a finished one is never redone.

The stages' work is the caller's: ``actions`` maps a stage name to a function that takes the outputs of
its upstream stages and returns its own outputs (name -> content hash). That keeps this loop one
definition for the CLI and the tests. The store is opened only for each record (``open_store``), never
while a stage works: a stage's own commands (`run`, `import`) write the store themselves, and the store
has one writer at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

from hierconsole.study.db.replications import put_stage, stage_rows
from hierconsole.study.db.storage import Store
from hierconsole.study.run.stage_graph import (
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
) -> Outcome:
    """Run every stage the plan says to run, in dependency order, until none is left.

    ``redo`` names stages to re-run together with everything downstream of them. A stage that raises is
    recorded failed and the error propagates (its dependents stay waiting)."""
    graph = list(stages)
    names = {s.name for s in graph}
    unknown = sorted(set(redo) - names)
    if unknown:
        raise ValueError(
            f"--redo names {unknown}, which are not stages of this replication ({sorted(names)})"
        )
    forced = dependents(graph, redo)
    ran: list[str] = []
    def put(name: str, state: StageState, key: str, outputs: Mapping[str, str], seconds: float | None) -> None:
        with open_store() as store:
            put_stage(store, replication_id, name, state, key, outputs, seconds)

    while True:
        with open_store() as store:
            records = load_records(store, replication_id)
        planned = plan(graph, external, records, forced)
        ready = runnable(planned)
        if not ready:
            break
        step = ready[0]
        assert step.key is not None  # RUN is decided only once every input exists
        name = step.stage.name
        upstream = {n: records[n].outputs for n in step.stage.needs}
        # The last finished run's time stays on the record while it runs again: the estimate's measure.
        last = records[name].seconds if name in records else None
        put(name, StageState.RUNNING, step.key, {}, last)
        if on_stage is not None:
            on_stage(name, False)
        started = time.perf_counter()
        try:
            outputs = dict(actions[name](upstream))
        except BaseException:
            put(name, StageState.FAILED, step.key, {}, last)
            raise
        seconds = time.perf_counter() - started
        put(name, StageState.DONE, step.key, outputs, seconds)
        forced.discard(name)
        ran.append(name)
        if on_stage is not None:
            on_stage(name, True)
    stale = tuple(p.stage.name for p in planned if p.decision == Decision.STALE)
    return Outcome(tuple(ran), stale, tuple(planned))
