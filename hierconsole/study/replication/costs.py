"""The time a replication's stages take on this machine: each stage's work (counted from its plan) times
the unit costs a short calibration measured, corrected by the stages that already ran.

Plain values in and out, so the arithmetic is tested by hand and every front end shows the same estimate
(`replicate --dry-run` prints it; the console shows it through `estimate`). A stage's work is what its
plan says it does: the commands it calls (in this process; only `extract` as a child), images through the
backbone, and its studies' jobs as phases (the tuning runs, the final seeds, the evaluation), each job
costing its cell-updates and its scored query x gallery pairs. A family's members run under one
orchestrator, so their phases are pooled: all members' final jobs share the family's slots, then all their
evaluations. A phase of J jobs on S slots and C cores takes ``J * work / min(J, S, C)`` seconds: every
running job shares the cores. Workers are forked by one standby that imported the engine once
(`study.executors.standby`): a run's first phase waits for that one start-up, and the standby stays
ready for the run's later phases (``warm``), which pay none. The refinement below corrects what this
misjudges on a machine.

Refinement: a stage that ran before (its wall time recorded) is estimated at that time (source
``measured``); every other stage is its calibrated prediction times the ratio measured / predicted of the
finished stages of its kind (extract, import, factorial, families, ...), or of all finished stages when
none of its kind has run, so a machine the calibration misjudged is corrected by what it actually did.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

CALIBRATED = "calibrated"
MEASURED = "measured"
"""Where a stage's estimate comes from: the calibration's unit costs, or the stage's own recorded time."""


@dataclass(frozen=True)
class Phase:
    """Jobs of a study started together (its tuning runs, its final seeds, its evaluation)."""

    jobs: int
    slots: int
    """How many of them may run at once (the preset's max_parallel_jobs, a family's for its members)."""
    updates: float = 0
    """Cell-updates per job: epochs x updates per epoch x cells (a pooled phase: its jobs' mean)."""
    comparisons: float = 0
    """Query x gallery pairs each job scores (validation passes and test perturbations together)."""
    warm: int = 0
    """Its jobs forked by a standby already ready (an earlier phase of the run started it); the others wait
    for the standby's one start-up."""


@dataclass(frozen=True)
class StageWork:
    commands: int = 0
    """Light commands (`import`, `run`, `taxonomy build-cub`, ...), called in this process: a
    ``command_start`` each."""
    torch_commands: int = 0
    """Child commands that import torch (`extract`): a worker's start-up each."""
    images: int = 0
    backbones: int = 0
    """Backbones built or loaded (one per extraction)."""
    phases: tuple[Phase, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StageWork:
        phases = tuple(Phase(**p) for p in data.get("phases", ()))
        return cls(**{**{k: v for k, v in data.items() if k in cls.__dataclass_fields__}, "phases": phases})


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per unit of work on one machine, as the calibration measured them."""

    command_start: float
    """A light command's start-up beyond its work: 0 where the calibration measures it now, since the
    stages call these commands in this process rather than as children."""
    worker_start: float
    """A child that imports torch and the engine, from its start to its first step."""
    cell_update: float
    """One optimiser step of one cell at the plan's batch and shapes, on a worker's threads."""
    comparison: float
    """One query x gallery pair scored (distances, ranking, the strict metrics)."""
    image: float
    """One image through the backbone."""
    backbone: float
    """Importing the extractor (transformers, beyond a worker's imports) and building the backbone."""
    cores: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnitCosts:
        return cls(**{f: data[f] for f in cls.__dataclass_fields__})


def job_work_seconds(phase: Phase, units: UnitCosts) -> float:
    """One job's computation (its start-up aside)."""
    return phase.updates * units.cell_update + phase.comparisons * units.comparison


def phase_seconds(phase: Phase, units: UnitCosts) -> float:
    """The phase's wall time: its jobs' work on the cores they share, after the standby's start-up unless
    every job of it is forked by a standby already ready."""
    if phase.jobs <= 0:
        return 0.0
    start = 0.0 if phase.warm >= phase.jobs else units.worker_start
    return start + phase.jobs * job_work_seconds(phase, units) / max(1, min(phase.jobs, phase.slots, units.cores))


def predicted_seconds(work: StageWork, units: UnitCosts) -> float:
    """The calibrated time of a stage: its commands, its images and its studies' phases."""
    return (
        work.commands * units.command_start
        + work.torch_commands * units.worker_start
        + work.backbones * units.backbone
        + work.images * units.image
        + sum(phase_seconds(phase, units) for phase in work.phases)
    )


def stage_kind(stage: str) -> str:
    """extract-cub -> extract; tables -> tables: stages of one kind share a correction."""
    return stage.partition("-")[0]


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    seconds: float
    source: str
    """``measured`` (its recorded time) or ``calibrated`` (the model, times ``scale``)."""
    scale: float = 1.0
    """measured / predicted of the finished stages it was corrected by (1.0: none has run)."""
    scaled_by: int = 0
    """How many finished stages that ratio comes from."""

    def describe(self) -> str:
        if self.source == MEASURED:
            return "measured (its last run)"
        if not self.scaled_by:
            return CALIBRATED
        return f"{CALIBRATED} x{self.scale:.2f} ({self.scaled_by} finished)"


@dataclass(frozen=True)
class Estimate:
    stages: tuple[StageEstimate, ...]
    """The stages still to run, in plan order."""

    @property
    def total(self) -> float:
        return sum(s.seconds for s in self.stages)


def _ratio(pairs: Iterable[tuple[float, float]]) -> tuple[float, int]:
    pairs = [(m, p) for m, p in pairs if p > 0]
    predicted = sum(p for _, p in pairs)
    if not pairs or predicted <= 0:
        return 1.0, 0
    return sum(m for m, _ in pairs) / predicted, len(pairs)


def estimate(
    left: Iterable[str],
    work: Mapping[str, StageWork],
    units: UnitCosts,
    measured: Mapping[str, float],
    history: Iterable[tuple[str, float, float]] = (),
) -> Estimate:
    """Seconds for each stage in ``left`` (the stages still to run).

    ``measured`` holds the recorded wall time of every stage that has run (finished or to be run again).
    A stage of ``left`` found there is estimated at its time; the rest at their prediction times the
    measured / predicted ratio of the finished stages of their kind, else of the home's other replications'
    (``history``: stage, measured, predicted), else of all finished stages, else of all the home's."""
    predicted = {name: predicted_seconds(w, units) for name, w in work.items()}
    own = [(name, seconds, predicted[name]) for name, seconds in measured.items() if name in predicted]
    home = list(history)
    out: list[StageEstimate] = []
    for name in left:
        if name in measured:
            out.append(StageEstimate(name, measured[name], MEASURED))
            continue
        kind = stage_kind(name)
        scale, count = 1.0, 0
        for source in (own, home):
            if not count:
                scale, count = _ratio((m, p) for n, m, p in source if stage_kind(n) == kind)
        for source in (own, home):
            if not count:
                scale, count = _ratio((m, p) for _, m, p in source)
        seconds = predicted.get(name, 0.0) * scale
        out.append(StageEstimate(name, seconds if math.isfinite(seconds) else 0.0, CALIBRATED, scale, count))
    return Estimate(tuple(out))
