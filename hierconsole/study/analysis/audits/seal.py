"""The seal on the official test: every final cell scored on the same registered Q/G splits, the test read
only after the lock, no training or tuning job handed a test index, each arm's epoch chosen on validation
alone, and the lock hash still matching what the store holds."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from hierconsole.contract import layout
from hierconsole.contract.jobspec import ModelRef
from hierconsole.plurals import counted
from hierconsole.study.analysis.audits.result import Check, Row, Study, cell_name, evidence, listed
from hierconsole.study.analysis.durations import Curves, Duration, arm_durations
from hierconsole.vocabulary import JobKind, JobState


@dataclass(frozen=True)
class QgScores:
    scored: list[tuple[str, int]]
    """(run_id, perturbation) of every official-test (not post-hoc) metric."""
    splits: list[tuple[str, int, str]]
    """(role, perturbation, sha256) of each registered Q/G split, by role."""
    finals: list[str]
    """The final runs' ids, by seed and arm."""
    baselines: list[str]
    """The untrained baselines' run ids: scored once per perturbation, like a final cell of no seed."""


@dataclass(frozen=True)
class TestReads:
    locked_at: datetime | None
    test_first_read_at: datetime | None
    finals: list[Row]
    """The final jobs: job_id, state, finished_at."""


@dataclass(frozen=True)
class HandedSplits:
    job_id: str
    kind: str
    test_seeds: tuple[int, ...]
    """The official-test perturbations its spec hands it."""
    files: dict[str, dict[str, np.ndarray]]
    """Each split file it was given (`train`, `val`, `qg:<seed>`) -> part -> sample indices."""


@dataclass(frozen=True)
class TestIsolation:
    test: np.ndarray
    """The official-test sample indices."""
    jobs: list[HandedSplits]
    """The training and tuning jobs, by id."""


@dataclass(frozen=True)
class EpochSelection:
    study: Study
    runs: list[Row]
    """The final runs, by seed and arm."""
    stored: dict[str, Duration]
    """The durations frozen at the lock."""
    curves: Curves
    """The stored validation scores the durations are recomputed from."""
    arms: list[str]
    """The arms with final runs."""
    reached: list[tuple[str, int]]
    """(arm, updates) of each final run at its arm's frozen epoch."""
    at_frozen: set[str]
    """The final runs that recorded their arm's frozen epoch."""
    val: np.ndarray
    """The validation split's samples (query and gallery)."""
    fit: np.ndarray
    """The samples the final runs fit."""
    scored: tuple[ModelRef, ...] | None
    """The models the evaluation scores; None before it exists."""


@dataclass(frozen=True)
class LockCheck:
    locked: str | None
    """The lock hash recorded at the lock; None before it."""
    digest: str
    """The lock hash recomputed from what the store and job folders hold now."""
    missing: list[str]
    """What the recomputed hash lacks."""


def qg_splits_identical(e: QgScores) -> Check:
    if not e.scored:
        return Check("qg_splits_identical", None, "no official-test metrics yet")
    expected = sorted(p for _, p, _ in e.splits)
    by_run: dict[str, set[int]] = defaultdict(set)
    for run_id, perturbation in e.scored:
        by_run[run_id].add(perturbation)
    finals = e.finals + e.baselines
    cells = f"{len(finals) - len(e.baselines)} final cells" + (f" and {len(e.baselines)} baselines" if e.baselines else "")
    bad = []
    for run_id in finals:
        have = by_run.get(run_id, set())
        missing = [p for p in expected if p not in have]
        extra = sorted(have.difference(expected))
        if missing:
            bad.append(f"{cell_name(run_id)} lacks Q/G perturbation(s) {', '.join(map(str, missing))}")
        if extra:
            bad.append(
                f"{cell_name(run_id)} was scored on unregistered perturbation(s) {', '.join(map(str, extra))}"
            )
    bad += [
        f"{cell_name(r)} is not a final run of this study" for r in sorted(set(by_run).difference(finals))
    ]
    ev = ", ".join(f"{role} {sha[:12]}" for role, _, sha in e.splits)
    # Counted in the order the roles are listed in the evidence.
    per_split = [sum(p in have for have in by_run.values()) for _, p, _ in e.splits]
    n = len(e.splits)
    summary = (
        f"not every final cell was evaluated on the same {n} Q/G splits ({ev}); cells per split: {per_split}"
        if bad
        else f"every one of {cells} evaluated on the same {n} Q/G splits ({ev}); "
        f"cells per split: {per_split}"
    )
    return Check("qg_splits_identical", not bad, evidence(summary, bad))


def test_read_after_lock(e: TestReads) -> Check:
    if e.test_first_read_at is None:
        return Check("test_read_after_lock", None, "the official test split has not been read")
    locked, read = e.locked_at, e.test_first_read_at
    bad = []
    if locked is None:
        bad.append(f"the test split was first read at {read} but the study was never locked")
    elif read < locked:
        bad.append(f"the test split was first read at {read}, before the lock at {locked}")
    for job in e.finals:
        name = cell_name(job["job_id"])
        if job["state"] != JobState.FINISHED:
            bad.append(f"final job {name} is {job['state']}")
        elif locked is not None and job["finished_at"] > locked:
            bad.append(f"final job {name} finished at {job['finished_at']}, after the lock at {locked}")
    last = max((j["finished_at"] for j in e.finals if j["finished_at"] is not None), default=None)
    summary = f"last final run finished {last}, locked {locked}, test first read {read}"
    return Check("test_read_after_lock", not bad, evidence(summary, bad))


def tuning_never_read_test(e: TestIsolation) -> Check:
    """No training or tuning job was handed an official-test index."""
    test = set(e.test.tolist())
    if not e.jobs:
        return Check("tuning_never_read_test", None, "no jobs yet")
    leaks = []
    for job in e.jobs:
        name = cell_name(job.job_id)
        if job.test_seeds:
            leaks.append(f"{name} was handed the official-test perturbation(s) {', '.join(map(str, job.test_seeds))}")
        for role, parts in job.files.items():
            for part, indices in parts.items():
                n = len(test.intersection(indices.tolist()))
                if n:
                    leaks.append(f"{name} {role}.{part} holds {n} official-test indices")
    n_tune = sum(j.kind == JobKind.TUNE for j in e.jobs)
    return Check(
        "tuning_never_read_test",
        not leaks,
        listed(leaks)
        if leaks
        else f"{n_tune} tuning and {len(e.jobs) - n_tune} final jobs: "
        f"no index of the {len(test)} official-test samples in any split they were given",
    )


def epoch_selected_on_validation(e: EpochSelection) -> Check:
    """A study that selects its epoch froze one duration per arm, the candidate epoch with the best mean
    over seeds of the stored validation score (recomputed here), and test scored every seed of the arm at
    that epoch; a fixed-endpoint study scores its last epoch."""
    name = "epoch_selected_on_validation"
    preset = e.study.preset
    training = preset.training
    if not training.select_epoch:
        return Check(name, True, f"fixed endpoint: every cell is scored at epoch {training.epochs}")
    runs = e.runs
    if not runs or any(r["final_sha256"] is None for r in runs):
        return Check(name, None, "final runs not finished")
    stored = e.stored
    if not stored:
        return Check(name, None, "no duration frozen yet (the study is not locked)")
    recomputed, missing = arm_durations(e.curves, e.arms, preset)
    bad = list(missing)
    arms = sorted({r["arm"] for r in runs})
    for arm in arms:
        got, want = stored.get(arm), recomputed.get(arm)
        if got is None:
            bad.append(f"{arm} has no frozen duration")
        elif want is not None and (got.epoch, got.score) != (want.epoch, want.score):
            bad.append(
                f"{arm} was frozen at epoch {got.epoch} (seed mean {got.score:.6f}), but the stored validation "
                f"scores put the best seed mean at epoch {want.epoch} ({want.score:.6f})"
            )
    bad += [f"{arm} has a frozen duration but no final run" for arm in sorted(set(stored).difference(arms))]
    # Every seed of an arm trained through the same frozen epoch: one update count there across seeds.
    reached: dict[str, set[int]] = defaultdict(set)
    for arm, updates in e.reached:
        reached[arm].add(updates)
    for r in runs:
        if r["arm"] in stored and r["run_id"] not in e.at_frozen:
            bad.append(f"{cell_name(r['run_id'])} never reached its arm's frozen epoch {stored[r['arm']].epoch}")
    bad += [f"{arm}: the seeds made {sorted(u)} updates by the frozen epoch" for arm, u in sorted(reached.items()) if len(u) > 1]
    # Selection saw no test sample: final runs fit the train part and validate on the validation split.
    overlap = len(set(e.val.tolist()).intersection(e.fit.tolist()))
    if overlap:
        bad.append(f"the final runs fit {overlap} validation samples they select on")
    for m in e.scored or ():
        frozen = stored.get(m.cell.key)
        if frozen is not None and not m.weights.endswith("/" + layout.candidate_model(m.cell, frozen.epoch)):
            bad.append(
                f"evaluation scores {cell_name(m.run_id)} from {m.weights.rsplit('/', 1)[-1]}, not its arm's "
                f"frozen epoch {frozen.epoch}"
            )
    shown = [
        f"{d.arm} epoch {d.epoch} (seed mean {d.score:.4f} over {counted(d.seeds, 'seed')})" for d in stored.values()
    ]
    summary = (
        f"one duration per arm from the seed-mean validation {training.selection_score} "
        f"({preset.evaluation.aggregation}), every seed scored at it, no test read: {listed(shown)}"
    )
    return Check(name, not bad, evidence(summary, bad))


def lock_hash_matches(e: LockCheck) -> Check:
    """The lock hash recomputed from what the store and the job folders hold now equals the one recorded at
    the lock: no final state, split, frozen duration or scored checkpoint changed after it."""
    name = "lock_hash_matches"
    if e.locked is None:
        return Check(name, None, "the study is not locked")
    bad = list(e.missing)
    if e.digest != e.locked:
        bad.append(f"recomputed {e.digest[:12]}, recorded at the lock {e.locked[:12]}")
    return Check(name, not bad, evidence(f"lock hash {e.locked[:12]} over the preset, splits and final states", bad))
