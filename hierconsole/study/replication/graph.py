"""The replication's stage graph, as pure decisions over stored records.

A stage is keyed by the content hashes of its inputs: the external ones (dataset folders, weights,
taxonomy, scale, seed) and the outputs its upstream stages recorded. A stage whose stored key equals the
one computed now is done and never redone; one whose key differs is *stale*: it is named, and it and its
dependents re-run only when asked (``--redo STAGE``). Nothing here touches the store or the disk, so each
rule is tested on plain values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from hierconsole.vocabulary import StageStatus


class StageState(StrEnum):
    """What a stored stage record says: three of the words the console shows (`vocabulary.StageStatus`),
    so a record reads the same in both."""

    RUNNING = StageStatus.RUNNING.value
    DONE = StageStatus.DONE.value
    FAILED = StageStatus.FAILED.value


class Decision(StrEnum):
    """What the planner decides for a stage now."""

    DONE = "done"  # finished under the key computed now: skipped
    RUN = "run"  # never finished (or failed, or interrupted), or forced by --redo: runs once its inputs exist
    STALE = "stale"  # finished under another key: an input changed; kept until --redo names it
    WAITING = "waiting"  # an upstream stage has not finished yet


@dataclass(frozen=True)
class Stage:
    name: str
    needs: tuple[str, ...] = ()
    """Upstream stages whose recorded outputs are this stage's inputs."""
    inputs: tuple[str, ...] = ()
    """Names of external inputs (content hashes the caller computes) this stage reads."""
    store: bool = True
    """Whether the stage opens the store (its commands write it, or it reads it). The store has one writer
    at a time, so such stages run one after another; the others (an extraction, a taxonomy file) run
    beside them."""
    derived: bool = False
    """Whether the stage only reshapes what is already in the store into its own files, in seconds (the
    tables, the report): one whose key changed is run again at once instead of being kept as stale, since
    that costs nothing a user would want to keep (a dataset added to a replication gets its tables)."""


@dataclass(frozen=True)
class StageRecord:
    state: StageState
    input_key: str
    outputs: Mapping[str, str] = field(default_factory=dict)
    seconds: float | None = None


def ordered(stages: Iterable[Stage]) -> list[Stage]:
    """The stages in dependency order (ties kept in the given order); a cycle or an unknown need is an
    error naming the stage."""
    pending = list(stages)
    names = {s.name for s in pending}
    if len(names) != len(pending):
        raise ValueError("two stages share a name")
    for stage in pending:
        for need in stage.needs:
            if need not in names:
                raise ValueError(f"stage {stage.name!r} needs {need!r}, which is not in the graph")
    placed: list[Stage] = []
    done: set[str] = set()
    while pending:
        ready = [s for s in pending if all(n in done for n in s.needs)]
        if not ready:
            raise ValueError(f"the stages {sorted(s.name for s in pending)} depend on each other in a cycle")
        for stage in ready:
            placed.append(stage)
            done.add(stage.name)
        pending = [s for s in pending if s.name not in done]
    return placed


def dependents(stages: Iterable[Stage], roots: Iterable[str]) -> set[str]:
    """The roots and every stage downstream of them."""
    graph = list(stages)
    closed = set(roots)
    grew = True
    while grew:
        grew = False
        for stage in graph:
            if stage.name not in closed and any(n in closed for n in stage.needs):
                closed.add(stage.name)
                grew = True
    return closed


def stage_key(stage: Stage, external: Mapping[str, str], upstream: Mapping[str, Mapping[str, str]]) -> str:
    """sha256 over the stage's name, its external input hashes and its upstream stages' output hashes.

    A missing external input is an error (the caller validates its inputs before planning)."""
    missing = [name for name in stage.inputs if name not in external]
    if missing:
        raise KeyError(f"stage {stage.name!r} has no hash for its inputs {missing}")
    payload = {
        "stage": stage.name,
        "inputs": {name: external[name] for name in sorted(stage.inputs)},
        "upstream": {name: dict(sorted(upstream[name].items())) for name in sorted(stage.needs)},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Planned:
    stage: Stage
    decision: Decision
    key: str | None
    """The key computed now; None while an upstream stage has not finished."""
    stored_key: str | None


def plan(
    stages: Iterable[Stage],
    external: Mapping[str, str],
    records: Mapping[str, StageRecord],
    force: Iterable[str] = (),
) -> list[Planned]:
    """Decide each stage from the records, in dependency order.

    ``force`` holds the stages still to be redone (``--redo`` and their dependents, each removed once it
    ran). A stale stage's dependents are judged on its stored outputs, so they stay done until it reruns.
    """
    forced = set(force)
    out: list[Planned] = []
    finished: dict[str, Mapping[str, str]] = {}
    for stage in ordered(stages):
        record = records.get(stage.name)
        stored_key = record.input_key if record else None
        if not all(n in finished for n in stage.needs):
            out.append(Planned(stage, Decision.WAITING, None, stored_key))
            continue
        key = stage_key(stage, external, {n: finished[n] for n in stage.needs})
        if record is None or record.state != StageState.DONE or stage.name in forced:
            decision = Decision.RUN
        elif record.input_key == key:
            decision = Decision.DONE
        elif stage.derived:
            decision = Decision.RUN
        else:
            decision = Decision.STALE
        if decision in (Decision.DONE, Decision.STALE):
            assert record is not None
            finished[stage.name] = record.outputs
        out.append(Planned(stage, decision, key, stored_key))
    return out


def runnable(planned: Iterable[Planned]) -> list[Planned]:
    """The stages that can start now, decided RUN with all their inputs present: those that open the store
    first (the store's one lane is what the whole replication waits on), then the others, each group in
    dependency order."""
    ready = [p for p in planned if p.decision == Decision.RUN]
    return [p for p in ready if p.stage.store] + [p for p in ready if not p.stage.store]

