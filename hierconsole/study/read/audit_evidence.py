"""The evidence each audit judges, read from the store, the split files and the job specs: every query the
audits make lives here, and each check (`study.analysis.audits`) is a pure function of what one of these
returns."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np

from hierconsole.config.preset import Preset
from hierconsole.contract import layout
from hierconsole.contract.events import EventKind
from hierconsole.contract.jobspec import JobSpec
from hierconsole.locations import job_dir, resolve
from hierconsole.study.analysis.audits.baselines import PcaFit
from hierconsole.study.analysis.audits.fairness import FinalCells, FinalEpochs, FinalJobs
from hierconsole.study.analysis.audits.protocol import ShuffleControl, SplitCounts
from hierconsole.study.analysis.audits.result import Row, Study
from hierconsole.study.analysis.audits.seal import (
    EpochSelection,
    HandedSplits,
    LockCheck,
    QgScores,
    TestIsolation,
    TestReads,
)
from hierconsole.study.analysis.audits.tuning import Candidates, FromScratch, TuningReuse
from hierconsole.study.db import ids, split_files
from hierconsole.study.db.catalog import load_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.read.lock import current_lock_digest, final_arms, stored_durations, validation_curves
from hierconsole.vocabulary import PCA, TRAINING_KINDS, UNTRAINED_BASELINES, JobKind


def study(store: Store, study_id: str) -> Study:
    """The study's preset as registered (its canonical JSON), not as the shipped file reads now."""
    row = store.one("SELECT preset FROM studies WHERE study_id = ?", [study_id])
    assert row is not None  # audits run on a registered study
    recorded = json.loads(row[0])
    return Study(study_id, Preset.from_dict(recorded, source=f"study {study_id}", recorded=True), recorded)


def _final_runs(store: Store, study_id: str) -> list[Row]:
    return store.dicts(
        "SELECT * FROM runs WHERE study_id = ? AND kind = ? ORDER BY seed, arm", [study_id, JobKind.FINAL]
    )


def _dim(store: Store, study_id: str) -> int | None:
    row = store.one(
        "SELECT d.dim FROM studies s JOIN datasets d USING (dataset_id) WHERE s.study_id = ?", [study_id]
    )
    return None if row is None else int(row[0])


def _job_states(store: Store, study_id: str, kind: JobKind) -> list[str]:
    return [s for (s,) in store.rows("SELECT state FROM jobs WHERE study_id = ? AND kind = ?", [study_id, kind])]


def _split_path(store: Store, study_id: str, role: str) -> str:
    row = store.one("SELECT path FROM splits WHERE study_id = ? AND role = ?", [study_id, role])
    assert row is not None  # a study writes every split when it is created
    return str(resolve(store.home, row[0]))


def _split(store: Store, study_id: str, role: str, part: str) -> np.ndarray:
    with np.load(_split_path(store, study_id, role)) as z:
        return z[part]


def _final_fit(store: Store, s: Study) -> np.ndarray:
    """The samples the final runs fit."""
    return _split(store, s.study_id, split_files.final_train_role(s.preset), "fit")


def _spec(store: Store, job_id: str) -> JobSpec:
    return JobSpec.read(layout.spec_path(job_dir(store.home, job_id)))


def _evaluation(store: Store, study_id: str) -> JobSpec | None:
    row = store.one("SELECT job_id FROM jobs WHERE study_id = ? AND kind = ?", [study_id, JobKind.EVALUATE])
    return None if row is None else _spec(store, row[0])


def final_cells(store: Store, study_id: str) -> FinalCells:
    return FinalCells(
        study(store, study_id), _final_runs(store, study_id), _dim(store, study_id), _job_states(store, study_id, JobKind.FINAL)
    )


def final_cells_with_rows(store: Store, study_id: str) -> FinalCells:
    """The final cells and the rows they fit (the update budget is counted over them)."""
    s = study(store, study_id)
    return FinalCells(
        s, _final_runs(store, study_id), _dim(store, study_id), _job_states(store, study_id, JobKind.FINAL),
        train_rows=len(_final_fit(store, s)),
    )  # fmt: skip


def final_epochs(store: Store, study_id: str) -> FinalEpochs:
    rows = store.dicts(
        "SELECT r.seed, e.epoch, r.run_id, r.arm, e.batch_sha256, e.updates FROM epochs e JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? ORDER BY r.seed, e.epoch, r.run_id",
        [study_id, JobKind.FINAL],
    )
    return FinalEpochs(study(store, study_id), rows)


def final_jobs(store: Store, study_id: str) -> FinalJobs:
    jobs = store.rows(
        "SELECT job_id, threads, device FROM jobs WHERE study_id = ? AND kind = ? ORDER BY job_id",
        [study_id, JobKind.FINAL],
    )
    starts = store.rows(
        "SELECT e.job_id, e.payload FROM events e JOIN jobs j ON j.job_id = e.job_id "
        "WHERE j.study_id = ? AND j.kind = ? AND e.kind = ? ORDER BY e.ts",
        [study_id, JobKind.FINAL, EventKind.START],
    )
    # The latest start of each job wins.
    return FinalJobs(jobs, {job_id: json.loads(payload) for job_id, payload in starts})


def qg_scores(store: Store, study_id: str) -> QgScores:
    scored = store.rows(
        "SELECT DISTINCT run_id, perturbation FROM metrics WHERE study_id = ? AND NOT posthoc", [study_id]
    )
    splits = store.rows(
        f"SELECT role, sha256 FROM splits WHERE study_id = ? AND {split_files.QG_ROLES_SQL} ORDER BY role", [study_id]
    )
    baselines = [
        ids.baseline_run_id(study_id, b) for b in study(store, study_id).preset.evaluation.baselines if b in UNTRAINED_BASELINES
    ]
    return QgScores(
        scored=scored,
        splits=[(role, int(role[len(split_files.QG_PREFIX) :]), sha) for role, sha in splits],
        finals=[r["run_id"] for r in _final_runs(store, study_id)],
        baselines=baselines,
    )


def test_reads(store: Store, study_id: str) -> TestReads:
    row = store.dicts("SELECT locked_at, test_first_read_at FROM studies WHERE study_id = ?", [study_id])[0]
    finals = store.dicts(
        "SELECT job_id, state, finished_at FROM jobs WHERE study_id = ? AND kind = ? ORDER BY job_id",
        [study_id, JobKind.FINAL],
    )
    return TestReads(row["locked_at"], row["test_first_read_at"], finals)


def test_isolation(store: Store, study_id: str) -> TestIsolation:
    test = _split(store, study_id, split_files.PROTOCOL, "test")
    jobs = store.dicts(
        "SELECT job_id, kind FROM jobs WHERE study_id = ? AND kind IN (SELECT unnest(?)) ORDER BY job_id",
        [study_id, list(TRAINING_KINDS)],
    )
    handed = []
    for job in jobs:
        spec = _spec(store, job["job_id"])
        paths = {"train": spec.train_split, "val": spec.val_split, **{f"qg:{t.seed}": t.path for t in spec.test_splits}}
        files = {}
        for role, path in paths.items():
            if path is not None:
                with np.load(resolve(store.home, path)) as z:
                    files[role] = {part: z[part] for part in z.files}
        handed.append(HandedSplits(job["job_id"], job["kind"], tuple(t.seed for t in spec.test_splits), files))
    return TestIsolation(test, handed)


def epoch_selection(store: Store, study_id: str) -> EpochSelection:
    s = study(store, study_id)
    stored = stored_durations(store, study_id)
    # Each final run at its arm's frozen epoch: every seed must reach it, with one update count.
    frozen = store.rows(
        "SELECT r.run_id, r.arm, e.updates FROM epochs e JOIN runs r USING (run_id) JOIN arm_durations d "
        "ON d.study_id = r.study_id AND d.arm = r.arm AND d.epoch = e.epoch WHERE r.study_id = ? AND r.kind = ?",
        [study_id, JobKind.FINAL],
    )
    with np.load(_split_path(store, study_id, split_files.VAL)) as z:
        val = np.concatenate([z["query"], z["gallery"]])
    evaluation = _evaluation(store, study_id)
    return EpochSelection(
        study=s,
        runs=_final_runs(store, study_id),
        stored=stored,
        curves=validation_curves(store, study_id, s.preset),
        arms=final_arms(store, study_id),
        reached=[(arm, updates) for _, arm, updates in frozen],
        at_frozen={run_id for run_id, _, _ in frozen},
        val=val,
        fit=_final_fit(store, s),
        scored=None if evaluation is None else evaluation.models,
    )


def lock_check(store: Store, study_id: str) -> LockCheck:
    row = store.one("SELECT lock_sha256, preset_sha256 FROM studies WHERE study_id = ?", [study_id])
    assert row is not None  # audits run on a registered study
    locked, preset_sha = row
    if locked is None:
        return LockCheck(None, "", [])
    frozen = {arm: d.epoch for arm, d in stored_durations(store, study_id).items()}
    digest, missing = current_lock_digest(store, study_id, study(store, study_id).preset, preset_sha, frozen)
    return LockCheck(locked, digest, missing)


def candidates(store: Store, study_id: str) -> Candidates:
    runs = store.dicts(
        "SELECT * FROM runs WHERE study_id = ? AND kind = ? ORDER BY tau, arm", [study_id, JobKind.TUNE]
    )
    epochs = store.dicts(
        "SELECT e.epoch, r.run_id, e.batch_sha256, e.updates FROM epochs e JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? ORDER BY e.epoch, r.run_id",
        [study_id, JobKind.TUNE],
    )
    return Candidates(study(store, study_id), _job_states(store, study_id, JobKind.TUNE), runs, _dim(store, study_id), epochs)


def tuning_reuse(store: Store, study_id: str) -> TuningReuse:
    finals = _final_runs(store, study_id)
    home = store.home

    def resolved(path: str | None) -> str | None:
        return None if path is None else str(resolve(home, path))

    tuning = store.rows("SELECT job_id FROM jobs WHERE study_id = ? AND kind = ?", [study_id, JobKind.TUNE])
    ends = {r["final_sha256"]: r["run_id"] for r in store.dicts(
        "SELECT run_id, final_sha256 FROM runs WHERE study_id = ? AND kind = ? AND final_sha256 IS NOT NULL",
        [study_id, JobKind.TUNE],
    )}  # fmt: skip
    handed = {}
    for job_id in sorted({r["job_id"] for r in finals}):
        spec = _spec(store, job_id)
        handed[job_id] = [
            (what, resolved(path))
            for what, path in (("output folder", spec.out_dir), ("train split", spec.train_split), ("val split", spec.val_split))
        ]
    evaluation = _evaluation(store, study_id)
    return TuningReuse(
        finals=finals,
        tuning_dirs={job_id: str(job_dir(home, job_id)) for (job_id,) in tuning},
        final_dirs={job_id: str(job_dir(home, job_id)) for job_id in handed},
        ends=ends,
        handed=handed,
        scored=None
        if evaluation is None
        else [(m.run_id, m.weights, str(resolve(home, m.weights))) for m in evaluation.models],
    )


def from_scratch(store: Store, study_id: str) -> FromScratch:
    s = study(store, study_id)
    epochs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for run_id, epoch, updates in store.rows(
        "SELECT e.run_id, e.epoch, e.updates FROM epochs e JOIN runs r USING (run_id) WHERE r.study_id = ? "
        "AND r.kind = ? ORDER BY e.run_id, e.epoch",
        [study_id, JobKind.FINAL],
    ):
        epochs[run_id].append((epoch, updates))
    tuning = store.rows(
        "SELECT DISTINCT init_sha256 FROM runs WHERE study_id = ? AND kind = ?", [study_id, JobKind.TUNE]
    )
    return FromScratch(s, _final_runs(store, study_id), len(_final_fit(store, s)), dict(epochs), [i for (i,) in tuning])


def split_counts(store: Store, study_id: str) -> SplitCounts:
    s = study(store, study_id)
    rows: dict[str, dict[str, Any]] = {
        role: {"sizes": json.loads(sizes), "params": json.loads(params)}
        for role, sizes, params in store.rows(
            "SELECT role, sizes, params FROM splits WHERE study_id = ? ORDER BY role", [study_id]
        )
    }
    return SplitCounts(
        preset=s.preset,
        protocol=rows[split_files.PROTOCOL],
        tuning_sizes=rows[split_files.TUNING]["sizes"],
        qg_sizes=[r["sizes"] for role, r in rows.items() if role.startswith(split_files.QG_PREFIX)],
        development_fit=len(_split(store, study_id, split_files.FINAL_TRAIN, "fit")),
        final_fit=len(_final_fit(store, s)),
        groups=_level_groups(store, study_id),
    )


def _level_groups(store: Store, study_id: str) -> dict[str, int]:
    """level code -> the groups of the study's dataset at that level, leaf first (`dataset_levels`)."""
    rows = store.rows(
        "SELECT l.code, l.n_groups FROM studies s JOIN dataset_levels l USING (dataset_id) WHERE s.study_id = ? "
        "ORDER BY l.position",
        [study_id],
    )
    assert rows  # a registered study has its dataset
    return {code: int(n) for code, n in rows}


def shuffle_control(store: Store, study_id: str) -> ShuffleControl:
    s = study(store, study_id)
    if not s.recorded["controls"]["taxonomy_shuffle"]:
        return ShuffleControl(asked=False, record=None)
    found = _shuffle_record(store, study_id)
    if found is None:
        return ShuffleControl(asked=True, record=None)
    r, fixed_min = found
    dataset = store.one("SELECT dataset_id FROM studies WHERE study_id = ?", [study_id])
    assert dataset is not None  # audits run on a registered study
    ds = load_dataset(store, dataset[0])
    edges = ds.taxonomy.levels.edges
    with np.load(resolve(store.home, r["path"])) as z:
        # The training taxonomy's file names each edge `{child}_{parent}` (three levels: leaf_middle,
        # middle_high, as job folders written before levels were general hold them).
        parents = tuple(z[edge].astype(np.int64) for edge in edges)
    dev_rows = _split(store, study_id, split_files.FINAL_TRAIN, "fit")
    jobs = tuple(
        (job_id, kind, _spec(store, job_id).train_taxonomy)
        for job_id, kind in store.rows("SELECT job_id, kind FROM jobs WHERE study_id = ? ORDER BY job_id", [study_id])
    )
    return ShuffleControl(True, r, ds.taxonomy, ds.leaf[dev_rows], parents, fixed_min, jobs)


def _shuffle_record(store: Store, study_id: str) -> tuple[Row, tuple[int, ...]] | None:
    """The study's recorded shuffle (seed, sha256, path: `taxonomy_shuffles`) and the fewest fixed points
    of each edge, fine to coarse (`taxonomy_shuffle_edges`); None when the store records none."""
    row = store.dicts("SELECT * FROM taxonomy_shuffles WHERE study_id = ?", [study_id])
    if not row:
        return None
    minima = store.rows("SELECT fixed_min FROM taxonomy_shuffle_edges WHERE study_id = ? ORDER BY position", [study_id])
    return row[0], tuple(int(m) for (m,) in minima)


def pca_fit(store: Store, study_id: str) -> PcaFit:
    s = study(store, study_id)
    run_id = ids.baseline_run_id(study_id, PCA)
    if PCA not in s.preset.evaluation.baselines:
        return PcaFit(s, run_id, None)
    row = store.one(
        "SELECT payload FROM events WHERE job_id = ? AND kind = ? ORDER BY ts DESC LIMIT 1",
        [ids.evaluate_job_id(study_id), EventKind.BASELINE_FIT],
    )
    if row is None:
        return PcaFit(s, run_id, None)
    return PcaFit(s, run_id, json.loads(row[0]), _final_fit(store, s), _split(store, study_id, split_files.PROTOCOL, "test"))

