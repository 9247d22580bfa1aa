"""The domain's words, each defined once: levels, arms, job kinds and states, study phases, metrics, the
hier score. Everything else (SQL views included, see `study/db/views.py`) imports them from here.

This module imports nothing but the standard library, so both halves of the package, the front ends and
the worker processes can use it at no start-up cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Literal, get_args

from hierconsole.levels import PAPER_LEVELS
from hierconsole.registry import GEOMETRIES as GEOMETRY_COMPONENTS
from hierconsole.registry import OBJECTIVES as OBJECTIVE_COMPONENTS

# -- the taxonomy ---------------------------------------------------------------------------------------

# A taxonomy's levels (codes, display names, any depth from two to twelve) are `hierconsole.levels`.
DEFAULT_LEVEL_NAMES: tuple[str, ...] = PAPER_LEVELS.names
CUB_LEVEL_NAMES: tuple[str, ...] = ("Class", "Genus", "Family")
NABIRDS_LEVEL_NAMES: tuple[str, ...] = ("Leaf", "Parent", "Supergroup")

# -- the factorial --------------------------------------------------------------------------------------

EUCLIDEAN, POINCARE = "euclidean", "poincare"
GEOMETRIES: tuple[str, str] = (EUCLIDEAN, POINCARE)
REGRESSION, SUPCON = "regression", "supcon"
LOSSES: tuple[str, str] = (REGRESSION, SUPCON)

ARMS: tuple[str, str, str, str] = ("E_R", "H_R", "E_S", "H_S")
"""The 2x2 cells, geometry (E = Euclidean, H = Poincaré) x loss (R = regression, S = Taxonomy-SupCon), in
paper order."""

# The built-in components' arm codes (E, H, L, M; R, S, C, F), from the registry that defines them.
_GEOMETRY_LETTER = {name: c.code for name, c in GEOMETRY_COMPONENTS.items()}
_LOSS_LETTER = {name: c.code for name, c in OBJECTIVE_COMPONENTS.items()}


FROZEN, PCA, HIER_STYLE = "frozen", "pca", "hier"
UNTRAINED_BASELINES: tuple[str, str] = (FROZEN, PCA)
"""Untrained reference arms: the input features L2-normalised (Euclidean ranking = cosine), and their PCA
to the projector's output width fitted on the study's training samples. Neither depends on a training
seed; the evaluation computes them."""
TRAINED_BASELINES: tuple[str] = (HIER_STYLE,)
"""Reference arms trained per seed: HIER-style (a projector of the cells' shape trained on leaf labels with
Proxy-Anchor plus HIER's hyperbolic-proxy regulariser), a cell of each seed's final job, so it has a SD."""
BASELINES: tuple[str, str, str] = (*UNTRAINED_BASELINES, *TRAINED_BASELINES)
"""Reference arms a study may score beside the cells (preset `evaluation.baselines`), in display order."""
HIER_STYLE_LOSS = "hier"
"""The loss of the HIER-style cell (Proxy-Anchor + HIER term); not a factorial loss (LOSSES)."""

BASELINE_SEED = -1
"""The seed column of a baseline's stored rows: one row per Q/G perturbation, shared by every training
seed (a contrast against a baseline pairs each seed with that one value)."""

BASELINE_LEGEND = (
    "baselines: frozen and pca do not depend on the training seed (one value per Q/G perturbation, no SD); "
    "hier is trained in each seed's job (mean ± SD)"
)
"""The line printed under any table that shows baseline rows."""


def arm_parts(arm: str) -> tuple[str, str]:
    """(geometry, loss) of an arm of built-in components such as "H_S" (an arm of one's own component
    is known to its study's preset alone: `FactorialConfig.cell`)."""
    g, _, loss = arm.partition("_")
    geometry = next((name for name, letter in _GEOMETRY_LETTER.items() if letter == g), None)
    objective = next((name for name, letter in _LOSS_LETTER.items() if letter == loss), None)
    if geometry is None or objective is None:
        raise ValueError(f"unknown arm {arm!r}; expected a built-in geometry code ({', '.join(_GEOMETRY_LETTER.values())}), '_' and a built-in objective code ({', '.join(_LOSS_LETTER.values())})")
    return geometry, objective


def arm_name(geometry: str, loss: str) -> str:
    """The arm of a built-in (geometry, loss) pair: ("poincare", "supcon") -> "H_S"."""
    return f"{_GEOMETRY_LETTER[geometry]}_{_LOSS_LETTER[loss]}"


# -- jobs and studies -----------------------------------------------------------------------------------


class JobKind(StrEnum):
    """What a job does; the order is the order in which queued jobs start."""

    TUNE = "tune"
    FINAL = "final"
    EVALUATE = "evaluate"
    RESCORE = "rescore"


TRAINING_KINDS: tuple[JobKind, ...] = (JobKind.TUNE, JobKind.FINAL)
SCORING_KINDS: tuple[JobKind, ...] = (JobKind.EVALUATE, JobKind.RESCORE)


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"  # the worker raised: its traceback tail is the job's error
    CANCELLED = "cancelled"
    CRASHED = "crashed"  # the worker vanished: judged by PID, process start time and heartbeat


ORPHANED = "orphaned"
"""How a job stored as running is shown when no orchestrator holds the store: nobody ingests its events
(its worker may still run, to be adopted by the next console, `run` or `resume`, or be gone)."""
STOPPED = "stopped"
"""How a job stored as running is shown when its orchestrator stopped the worker but could not record it
(the store could not be written, e.g. a full disk): the worker is gone, `resume` runs the job again."""

ACTIVE_STATES: tuple[JobState, ...] = (JobState.QUEUED, JobState.RUNNING)
"""States of a job that still holds a place in the queue."""
RESUMABLE_STATES: tuple[JobState, ...] = (JobState.CRASHED, JobState.CANCELLED, JobState.FAILED)
"""States from which `resume` queues a job again, to continue from its last checkpoint."""


class Executor(StrEnum):
    """Where a job's worker process runs: a subprocess of the orchestrator, or a Ray task on a cluster.
    Not part of a study's configuration: a job's results are the same under every executor."""

    LOCAL = "local"
    RAY = "ray"


EXECUTORS: tuple[str, ...] = tuple(Executor)


class Phase(StrEnum):
    """A study's phases, in order: tuning is skipped when no temperature is tuned."""

    TUNING = "tuning"
    TRAINING = "training"
    LOCKED = "locked"
    EVALUATING = "evaluating"
    COMPLETE = "complete"


class StageStatus(StrEnum):
    """Where a replication's stage stands, as the console shows it: its record's state (running, done,
    failed: the values `replicate` stores), pending before it has one, and stale when a stage it reads
    has run again since it finished (it re-runs with `replicate --redo`)."""

    DONE = "done"
    RUNNING = "running"
    STALE = "stale"
    PENDING = "pending"
    FAILED = "failed"


# -- the protocol's choices -----------------------------------------------------------------------------

Aggregation = Literal["micro", "macro"]
AGGREGATIONS: tuple[Aggregation, ...] = get_args(Aggregation)
MICRO, MACRO = AGGREGATIONS
"""Query-micro (mean over valid queries) or group-macro (mean over groups of per-group means), paper S2."""
POSTHOC = "post-hoc"
POSTHOC_NOTE = "re-scored after the study was frozen; not the registered endpoint, which is unchanged"


def aggregation_label(aggregation: str, posthoc: bool) -> str:
    """How every table, JSON document and view names the aggregation it reports: a re-score under
    another aggregation than the registered one is always marked, e.g. `macro (post-hoc)`."""
    return f"{aggregation} ({POSTHOC})" if posthoc else aggregation


DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda", "mps")
"""`auto` picks cuda, then mps, then cpu."""
OPTIMIZERS: tuple[str, ...] = ("adamw",)
LR_SCHEDULES: tuple[str, ...] = ("constant",)
HIER_AUTHORS, HIER_MATCHED = "authors", "matched"
HIER_RECIPES: tuple[str, ...] = (HIER_AUTHORS, HIER_MATCHED)
"""How the HIER-style arm trains: the authors' recipe (class-balanced batches, their linear head and
optimiser settings; its own batch order and parameter count, so the cells' init, batch-order and
parameter audits do not apply to it) or matched to the protocol (the cells' MLP, learning rate, batches)."""
HIER_AUTHORS_EXEMPT = "not applicable: authors' recipe"
"""How an audit that compares the cells names the HIER-style arm it leaves out under the authors' recipe."""
SPLIT_PROTOCOLS: tuple[str, ...] = ("official", "hierarchy_disjoint")
SPLIT_IMAGES: tuple[str, ...] = ("all", "official")
"""Which images a hierarchy-disjoint part takes from its groups: every one, or the official split's
(train and val from official train, test from official test)."""

SYNTHETIC_PREFIX = "synthetic:"
SYNTHETIC_DATASETS: tuple[str, ...] = ("demo", "cub-sized", "tree2", "tree5", "tree7", "tree12")
"""Built-in synthetic data, named in presets as `synthetic:<name>` and generated on first use."""

# -- metrics --------------------------------------------------------------------------------------------

MAP = "mAP"
RECALL_KS: tuple[int, ...] = (1, 5, 10, 20)
"""Recall@K cut-offs of every stored evaluation."""
RANKING_METRICS: tuple[str, ...] = (MAP, *(f"R@{k}" for k in RECALL_KS))
"""The stored per-level ranking metrics; besides them each level records valid_queries (and groups)."""

# "hier" means three things, each with its own name here: HIER_SCORE (this score, shown as a level),
# HIER_STYLE (the baseline arm) and HIER_STYLE_LOSS (that arm's loss). The stored strings are all "hier":
# a column, an arm and a loss are never compared with one another.
HIER_SCORE = "hier"
HIER_METRIC = f"{HIER_SCORE}_{MAP}"


def empty_level_note(level: str) -> str:
    """How a level without a valid query in a study's splits is named wherever the study is shown."""
    return f"{level}: no valid queries in this split"


def hier_score(map_by_level: Mapping[str, float | None], hier: Sequence[str]) -> float:
    """Mean mAP of the `hier` levels present; a level without a value (no valid query) is left out.

    `hier` is a study's declared levels (`hierconsole.levels.LevelPlan.hier`; by default every level
    above the leaf, so for three levels the paper's mean of middle and high, Sec. 3.4).

    NaN when no level has a value. The one definition behind tuning, the validation-best epoch, the
    per-seed `hier_mAP` column and the SQL views. The sum runs in level order, one addition at a time, so
    a stored score never moves by an ulp with the library that adds.
    """
    values = [map_by_level.get(level) for level in hier]
    present = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not present:
        return math.nan
    total = 0.0
    for v in present:
        total += v
    return total / len(present)
