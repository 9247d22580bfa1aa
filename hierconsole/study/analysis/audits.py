"""Fairness and leakage audits of a study, each a stored (check, ok, evidence) row.

A check is pending (ok = null) until the evidence it needs exists; it never passes on missing data. A
failing check's evidence names the offending cells (as `<job>/<arm>`, e.g. `final-s42/H_S`) and values.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from hierconsole.config.preset import HierConfig, Preset
from hierconsole.contract import layout
from hierconsole.contract.events import EventKind
from hierconsole.contract.jobspec import JobSpec
from hierconsole.datasets.splits import index_sha256
from hierconsole.locations import job_dir, resolve
from hierconsole.plurals import counted
from hierconsole.study.analysis.durations import arm_durations, stored_durations
from hierconsole.study.analysis.lock import lock_digest
from hierconsole.study.db import ids, split_files
from hierconsole.study.db.catalog import load_dataset
from hierconsole.study.db.storage import Store
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import (
    HIER_AUTHORS,
    HIER_AUTHORS_EXEMPT,
    HIER_STYLE,
    PCA,
    POINCARE,
    TRAINING_KINDS,
    UNTRAINED_BASELINES,
    JobKind,
    JobState,
    arm_parts,
)

NORM_TOLERANCE = 1e-6  # float32 rounding of the analytic bound
SHOWN = 5
"""Offenders named in one evidence line; the rest are counted."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    evidence: str


def expected_trainable(in_dim: int, hidden: int, out_dim: int) -> int:
    """Linear(d, h) + BatchNorm1d(h) affine + Linear(h, o): 205,600 at d=768, h=256, o=32."""
    return in_dim * hidden + hidden + 2 * hidden + hidden * out_dim + out_dim


def authors_head_trainable(in_dim: int, embedding: int) -> int:
    """The authors' HIER head: LayerNorm without affine (none) + Linear(d, e): 98,432 at d=768, e=128."""
    return in_dim * embedding + embedding


EXEMPT_CHECKS: tuple[str, ...] = ("trainable_parameters", "same_init_within_seed", "same_batch_order")
"""The cell-comparing audits that leave out the HIER-style arm under the authors' recipe (its own head,
init and class-balanced batches); `hier_authors_recipe` checks that arm against its own recipe instead."""


def _authors_hier(store: Store, study_id: str) -> HierConfig | None:
    """The study's HIER-style settings when it trains that arm by the authors' recipe, else None."""
    preset = _registered(store, study_id)
    hier = preset.baselines.hier
    return hier if HIER_STYLE in preset.evaluation.baselines and hier.recipe == HIER_AUTHORS else None


def _compared(store: Store, study_id: str, runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The runs a cell-comparing audit compares, and the note naming the ones it exempts ('' when none)."""
    if _authors_hier(store, study_id) is None:
        return runs, ""
    exempt = [r for r in runs if r["arm"] == HIER_STYLE]
    if not exempt:
        return runs, ""
    return [r for r in runs if r["arm"] != HIER_STYLE], f"; {HIER_STYLE} ({counted(len(exempt), 'run')}): {HIER_AUTHORS_EXEMPT}"


def _train_rows(store: Store, study_id: str) -> int:
    role = split_files.final_train_role(_registered(store, study_id))
    with np.load(_split_path(store, study_id, role)) as z:
        return len(z["fit"])


def cell_name(run_id: str) -> str:
    """`<study>/<job>/<arm>` -> `<job>/<arm>`: how evidence names a cell."""
    return run_id.split("/", 1)[1]


def _listed(items: Iterable[str]) -> str:
    items = list(items)
    shown = "; ".join(items[:SHOWN])
    return shown + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _majority(rows: Iterable[Any], key: Callable[[Any], Any]) -> tuple[Any, list[Any]]:
    """The most common value of `key` among `rows`, and the rows that differ from it (the offenders)."""
    rows = list(rows)
    common = Counter(key(r) for r in rows).most_common(1)[0][0]
    return common, [r for r in rows if key(r) != common]


def _evidence(summary: str, offenders: list[str]) -> str:
    """The check's summary, then (when it fails) the offending cells and their values."""
    return f"{summary}; {_listed(offenders)}" if offenders else summary


def _final_runs(store: Store, study_id: str) -> list[dict[str, Any]]:
    return store.dicts(
        "SELECT * FROM runs WHERE study_id = ? AND kind = ? ORDER BY seed, arm", [study_id, JobKind.FINAL]
    )


def _preset(store: Store, study_id: str) -> dict[str, Any]:
    """The study's registered preset as stored (its canonical JSON), not as the shipped file reads now."""
    row = store.one("SELECT preset FROM studies WHERE study_id = ?", [study_id])
    assert row is not None  # audits run on a registered study
    return json.loads(row[0])


def _registered(store: Store, study_id: str) -> Preset:
    return Preset.from_dict(_preset(store, study_id), source=f"study {study_id}", recorded=True)


def _split_path(store: Store, study_id: str, role: str) -> str:
    row = store.one("SELECT path FROM splits WHERE study_id = ? AND role = ?", [study_id, role])
    assert row is not None  # a study writes every split when it is created
    return str(resolve(store.home, row[0]))


def check_parameters(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs:
        return Check("trainable_parameters", None, "no final runs yet")
    row = store.one(
        "SELECT d.dim FROM studies s JOIN datasets d USING (dataset_id) WHERE s.study_id = ?", [study_id]
    )
    assert row is not None  # it has final runs, so the study and its dataset are registered
    dim = row[0]
    training = _preset(store, study_id)["training"]
    expected = expected_trainable(dim, training["hidden"], training["out_dim"])
    runs, exempt = _compared(store, study_id, runs)
    bad = [
        f"{cell_name(r['run_id'])} has {r['trainable_params']:,}"
        for r in runs
        if r["trainable_params"] != expected
    ]
    counts = sorted({r["trainable_params"] for r in runs})
    summary = f"{len(runs)} cells: {counts} trainable parameters; expected {expected:,} for {dim}-D input{exempt}"
    return Check("trainable_parameters", not bad, _evidence(summary, bad))


def check_same_init(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs:
        return Check("same_init_within_seed", None, "no final runs yet")
    runs, exempt = _compared(store, study_id, runs)
    by_seed: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by_seed[r["seed"]].append(r)
    bad, ok = [], []
    for seed, cells in sorted(by_seed.items()):
        common, odd = _majority(cells, lambda r: r["init_sha256"])
        if odd:
            bad += [
                f"seed {seed}: {cell_name(r['run_id'])} starts from {str(r['init_sha256'])[:12]}, the other "
                f"cells from {common[:12]}"
                for r in odd
            ]
        else:
            ok.append(f"seed {seed}: {common[:12]}")
    distinct = {seed: len({r["init_sha256"] for r in cells}) for seed, cells in sorted(by_seed.items())}
    summary = (
        f"distinct initial-state hashes per seed: { {s: n for s, n in distinct.items() if n != 1} }"
        if bad
        else f"one initial-state SHA256 per seed ({'; '.join(ok)})"
    ) + exempt
    return Check("same_init_within_seed", not bad, _evidence(summary, bad))


def check_batch_order(store: Store, study_id: str) -> Check:
    rows = store.dicts(
        "SELECT r.seed, e.epoch, r.run_id, r.arm, e.batch_sha256, e.updates FROM epochs e JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? ORDER BY r.seed, e.epoch, r.run_id",
        [study_id, JobKind.FINAL],
    )
    if not rows:
        return Check("same_batch_order", None, "no training epochs yet")
    rows, exempt = _compared(store, study_id, rows)
    by_epoch: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_epoch[(r["seed"], r["epoch"])].append(r)
    bad: list[str] = []
    disagree: set[tuple[int, int]] = set()
    for (seed, epoch), cells in by_epoch.items():
        for column, what in (("batch_sha256", "batch order"), ("updates", "update count")):
            common, odd = _majority(cells, itemgetter(column))
            bad += [
                f"seed {seed} epoch {epoch}: {cell_name(r['run_id'])} {what} {str(r[column])[:12]}, the "
                f"other cells {str(common)[:12]}"
                for r in odd
            ]
            if odd:
                disagree.add((int(seed), int(epoch)))
    summary = (
        f"cells disagree in batch order or update count at (seed, epoch) {sorted(disagree)[:SHOWN]}"
        if bad
        else f"{len(by_epoch)} (seed, epoch) pairs: one batch-order SHA256 and one update count across cells each"
    ) + exempt.replace(" run", " epoch record")
    return Check("same_batch_order", not bad, _evidence(summary, bad))


def check_update_budget(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs or any(r["updates"] is None for r in runs):
        return Check("update_budget", None, "final runs not finished")
    n = _train_rows(store, study_id)
    t = _preset(store, study_id)["training"]
    per_epoch = n // t["batch_size"] if t["drop_last"] else -(-n // t["batch_size"])
    expected = per_epoch * t["epochs"]
    rule = f"floor({n}/{t['batch_size']})" if t["drop_last"] else f"ceil({n}/{t['batch_size']})"
    hier = _authors_hier(store, study_id)
    hier_budget = None if hier is None else (n // hier.batch_size) * t["epochs"]
    bad = [
        f"{cell_name(r['run_id'])} made {r['updates']}"
        for r in runs
        if r["updates"] != (hier_budget if hier_budget is not None and r["arm"] == HIER_STYLE else expected)
    ]
    counts = sorted({r["updates"] for r in runs if hier_budget is None or r["arm"] != HIER_STYLE})
    summary = f"updates per cell {counts}; expected {rule} x {t['epochs']} = {expected}"
    if hier is not None and hier_budget is not None:
        # The same epochs over the same training rows, in the authors' class-balanced batches.
        hier_counts = sorted({r["updates"] for r in runs if r["arm"] == HIER_STYLE})
        summary += (
            f"; {HIER_STYLE} (authors' recipe) {hier_counts}; expected floor({n}/{hier.batch_size}) x "
            f"{t['epochs']} = {hier_budget}"
        )
    return Check("update_budget", not bad, _evidence(summary, bad))


def check_hier_authors_recipe(store: Store, study_id: str) -> Check:
    """The HIER-style arm under the authors' recipe, against that recipe: every run has their head's
    parameter count, and the audits that compare cells name it as exempt (EXEMPT_CHECKS); the update
    budget, sealed test and tuning isolation hold for it as for the cells."""
    name = "hier_authors_recipe"
    hier = _authors_hier(store, study_id)
    if hier is None:
        return Check(name, True, f"no {HIER_STYLE} arm trained by the authors' recipe in this study")
    runs = [r for r in _final_runs(store, study_id) if r["arm"] == HIER_STYLE]
    if not runs:
        return Check(name, None, f"no final {HIER_STYLE} runs yet")
    row = store.one(
        "SELECT d.dim FROM studies s JOIN datasets d USING (dataset_id) WHERE s.study_id = ?", [study_id]
    )
    assert row is not None  # it has final runs, so the study and its dataset are registered
    expected = authors_head_trainable(row[0], hier.embedding)
    bad = [f"{cell_name(r['run_id'])} has {r['trainable_params']:,}" for r in runs if r["trainable_params"] != expected]
    summary = (
        f"{counted(len(runs), 'run')}: their head, {expected:,} trainable parameters for {row[0]}-D input "
        f"(LayerNorm, Linear to {hier.embedding}); class-balanced batches of {hier.batch_size} "
        f"({hier.batch_size // hier.per_class} classes x {hier.per_class}); {', '.join(EXEMPT_CHECKS)}: "
        f"{HIER_AUTHORS_EXEMPT}"
    )
    return Check(name, not bad, _evidence(summary, bad))


def check_reload(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs or any(r["reload_max_diff"] is None for r in runs):
        return Check("checkpoint_reload_exact", None, "final runs not finished")
    bad = [
        f"{cell_name(r['run_id'])} differs by {r['reload_max_diff']:g}"
        for r in runs
        if r["reload_max_diff"] != 0.0
    ]
    worst = max(r["reload_max_diff"] for r in runs)
    summary = f"max |diff| of the reloaded verification sample over {len(runs)} cells: {worst:g}"
    return Check("checkpoint_reload_exact", not bad, _evidence(summary, bad))


def check_ball(store: Store, study_id: str) -> Check:
    runs = [r for r in _final_runs(store, study_id) if r["geometry"] == POINCARE]
    trained = _preset(store, study_id)["training"]["cells"]
    if not any(arm_parts(arm)[0] == POINCARE for arm in trained):
        # Nothing to bound: the check holds vacuously rather than waiting for embeddings that never come.
        return Check("hyperbolic_norms_in_ball", True, f"no hyperbolic cell in this study (cells {', '.join(trained)})")
    if not runs or any(r["max_norm"] is None for r in runs):
        return Check("hyperbolic_norms_in_ball", None, "no official-test hyperbolic embeddings yet")
    bad = []
    for r in runs:
        name, norm = cell_name(r["run_id"]), r["max_norm"]
        if not norm < r["ball_radius"]:
            bad.append(f"{name} max norm {norm:.6f} is not inside the ball of radius {r['ball_radius']:.6f}")
        elif norm > r["norm_bound"] + NORM_TOLERANCE:
            bad.append(f"{name} max norm {norm:.6f} exceeds the analytic bound {r['norm_bound']:.6f}")
    worst = max(runs, key=lambda r: r["max_norm"])
    summary = (
        f"max norm {worst['max_norm']:.6f} ({worst['run_id']}); ball radius {worst['ball_radius']:.4f}, "
        f"analytic bound {worst['norm_bound']:.6f}"
    )
    return Check("hyperbolic_norms_in_ball", not bad, _evidence(summary, bad))


def check_qg_identical(store: Store, study_id: str) -> Check:
    scored = store.rows(
        "SELECT DISTINCT run_id, perturbation FROM metrics WHERE study_id = ? AND NOT posthoc", [study_id]
    )
    splits = dict(
        store.rows(
            f"SELECT role, sha256 FROM splits WHERE study_id = ? AND {split_files.QG_ROLES_SQL}", [study_id]
        )
    )
    if not scored:
        return Check("qg_splits_identical", None, "no official-test metrics yet")
    expected = sorted(int(role[len(split_files.QG_PREFIX) :]) for role in splits)
    by_run: dict[str, set[int]] = defaultdict(set)
    for run_id, perturbation in scored:
        by_run[run_id].add(perturbation)
    # Baseline arms are scored once per perturbation, like a final cell of no seed.
    baselines = [
        ids.baseline_run_id(study_id, b)
        for b in _registered(store, study_id).evaluation.baselines
        if b in UNTRAINED_BASELINES
    ]
    finals = [r["run_id"] for r in _final_runs(store, study_id)] + baselines
    cells = f"{len(finals) - len(baselines)} final cells" + (f" and {len(baselines)} baselines" if baselines else "")
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
    ev = ", ".join(f"{role} {sha[:12]}" for role, sha in sorted(splits.items()))
    # Counted in the order the roles are listed in the evidence.
    per_split = [sum(int(role[len(split_files.QG_PREFIX) :]) in have for have in by_run.values()) for role in sorted(splits)]
    summary = (
        f"not every final cell was evaluated on the same {len(splits)} Q/G splits ({ev}); cells per split: {per_split}"
        if bad
        else f"every one of {cells} evaluated on the same {len(splits)} Q/G splits ({ev}); "
        f"cells per split: {per_split}"
    )
    return Check("qg_splits_identical", not bad, _evidence(summary, bad))


def check_test_after_lock(store: Store, study_id: str) -> Check:
    row = store.dicts("SELECT locked_at, test_first_read_at FROM studies WHERE study_id = ?", [study_id])[0]
    finals = store.dicts(
        "SELECT job_id, state, finished_at FROM jobs WHERE study_id = ? AND kind = ? ORDER BY job_id",
        [study_id, JobKind.FINAL],
    )
    if row["test_first_read_at"] is None:
        return Check("test_read_after_lock", None, "the official test split has not been read")
    locked, read = row["locked_at"], row["test_first_read_at"]
    bad = []
    if locked is None:
        bad.append(f"the test split was first read at {read} but the study was never locked")
    elif read < locked:
        bad.append(f"the test split was first read at {read}, before the lock at {locked}")
    for job in finals:
        name = job["job_id"].split("/", 1)[1]
        if job["state"] != JobState.FINISHED:
            bad.append(f"final job {name} is {job['state']}")
        elif locked is not None and job["finished_at"] > locked:
            bad.append(f"final job {name} finished at {job['finished_at']}, after the lock at {locked}")
    last = max((j["finished_at"] for j in finals if j["finished_at"] is not None), default=None)
    summary = f"last final run finished {last}, locked {locked}, test first read {read}"
    return Check("test_read_after_lock", not bad, _evidence(summary, bad))


def check_tuning_isolated(store: Store, study_id: str) -> Check:
    """No training or tuning job was handed an official-test index."""
    with np.load(_split_path(store, study_id, split_files.PROTOCOL)) as z:
        test = set(z["test"].tolist())
    jobs = store.dicts(
        "SELECT job_id, kind FROM jobs WHERE study_id = ? AND kind IN (SELECT unnest(?)) ORDER BY job_id",
        [study_id, list(TRAINING_KINDS)],
    )
    if not jobs:
        return Check("tuning_never_read_test", None, "no jobs yet")
    leaks = []
    for job in jobs:
        name = job["job_id"].split("/", 1)[1]
        spec = JobSpec.read(layout.spec_path(job_dir(store.home, job["job_id"])))
        if spec.test_splits:
            seeds = ", ".join(str(t.seed) for t in spec.test_splits)
            leaks.append(f"{name} was handed the official-test perturbation(s) {seeds}")
        files = {
            "train": spec.train_split,
            "val": spec.val_split,
            **{f"qg:{t.seed}": t.path for t in spec.test_splits},
        }
        for role, path in files.items():
            if path is None:
                continue
            with np.load(resolve(store.home, path)) as z:
                for part in z.files:
                    n = len(test.intersection(z[part].tolist()))
                    if n:
                        leaks.append(f"{name} {role}.{part} holds {n} official-test indices")
    n_tune = sum(j["kind"] == JobKind.TUNE for j in jobs)
    return Check(
        "tuning_never_read_test",
        not leaks,
        _listed(leaks)
        if leaks
        else f"{n_tune} tuning and {len(jobs) - n_tune} final jobs: "
        f"no index of the {len(test)} official-test samples in any split they were given",
    )


DEVICE_SETTINGS = ("device_name", "deterministic", "cublas_workspace", "float32_matmul", "torch_version")
"""What a start event records of a job's device and determinism (engine.determinism.DeviceSettings)."""


def _device_settings(store: Store, study_id: str) -> dict[str, dict[str, Any]]:
    """Final job -> the device settings of its latest start; jobs whose worker predates them are left out."""
    rows = store.rows(
        "SELECT e.job_id, e.payload FROM events e JOIN jobs j ON j.job_id = e.job_id "
        "WHERE j.study_id = ? AND j.kind = ? AND e.kind = ? ORDER BY e.ts",
        [study_id, JobKind.FINAL, EventKind.START],
    )
    latest = {job_id: json.loads(payload) for job_id, payload in rows}
    return {
        job_id: {k: p.get(k) for k in DEVICE_SETTINGS}
        for job_id, p in latest.items()
        if p.get("torch_version") is not None
    }


def _described(settings: dict[str, Any]) -> str:
    text = f"{settings['device_name']}, torch {settings['torch_version']}"
    if settings["deterministic"] is not None:
        text += (
            f", deterministic algorithms {settings['deterministic']}, "
            f"CUBLAS_WORKSPACE_CONFIG {settings['cublas_workspace']}"
        )
    return f"{text}, float32 matmul {settings['float32_matmul']}"


def check_threads(store: Store, study_id: str) -> Check:
    """One thread count and device for every final job, and (where recorded) one device setup, CUDA
    jobs with strict deterministic algorithms: what bitwise determinism of a study rests on."""
    rows = store.rows(
        "SELECT job_id, threads, device FROM jobs WHERE study_id = ? AND kind = ? ORDER BY job_id",
        [study_id, JobKind.FINAL],
    )
    if not rows:
        return Check("fixed_thread_count", None, "no final jobs yet")
    common, odd = _majority(rows, lambda r: (r[1], r[2]))
    bad = [
        f"{job_id.split('/', 1)[1]} ran with {t} thread(s) on {d}, the others with {common[0]} on {common[1]}"
        for job_id, t, d in odd
    ]
    distinct = sorted({(t, d) for _, t, d in rows})
    summary = (
        f"final jobs ran with (threads, device) {distinct}: bitwise determinism needs one fixed count"
        if bad
        else f"final jobs ran with (threads, device) {distinct}: bitwise determinism holds for a fixed count"
    )
    settings = _device_settings(store, study_id)
    if settings:
        key = lambda item: tuple(item[1][k] for k in DEVICE_SETTINGS)  # noqa: E731
        usual, others = _majority(settings.items(), key)
        bad += [f"{job_id.split('/', 1)[1]} ran on {_described(s)}" for job_id, s in others]
        bad += [
            f"{job_id.split('/', 1)[1]} ran on CUDA with deterministic algorithms {s['deterministic']}, not strict"
            for job_id, s in sorted(settings.items())
            if s["deterministic"] not in (None, "strict")
        ]
        summary += f"; device: {_described(dict(zip(DEVICE_SETTINGS, usual, strict=True)))}"
    return Check("fixed_thread_count", not bad, _evidence(summary, bad))


def check_taxonomy_shuffle(store: Store, study_id: str) -> Check:
    """A shuffle control trains on a development-only shuffle and evaluates on the true taxonomy."""
    name = "taxonomy_shuffle_development_only"
    if not _preset(store, study_id)["controls"]["taxonomy_shuffle"]:
        return Check(name, True, "no shuffle control: every job trains and evaluates on the true taxonomy")
    row = store.dicts("SELECT * FROM taxonomy_shuffles WHERE study_id = ?", [study_id])
    if not row:
        return Check(name, False, "the preset asks for a taxonomy shuffle but the store records none")
    r = row[0]
    dataset = store.one("SELECT dataset_id FROM studies WHERE study_id = ?", [study_id])
    assert dataset is not None  # audits run on a registered study
    ds = load_dataset(store, dataset[0])
    true = ds.taxonomy
    with np.load(resolve(store.home, r["path"])) as z:
        lm, mh = z["leaf_middle"].astype(np.int64), z["middle_high"].astype(np.int64)
    with np.load(_split_path(store, study_id, split_files.FINAL_TRAIN)) as z:
        dev_rows = z["fit"]
    dev_leaves = np.unique(ds.leaf[dev_rows])
    dev_middles = np.unique(true.leaf_middle[dev_leaves])
    bad = []
    shuffled = Taxonomy(
        leaves=true.leaves, middles=true.middles, highs=true.highs, leaf_middle=lm, middle_high=mh,
        level_names=true.level_names,
    )
    if shuffled.sha256() != r["sha256"]:
        bad.append(f"the training-taxonomy file hashes to {shuffled.sha256()[:12]}, the store says {r['sha256'][:12]}")
    other_leaves = np.setdiff1d(np.arange(true.n_leaves), dev_leaves)
    other_middles = np.setdiff1d(np.arange(true.n_middles), dev_middles)
    moved = int((lm[other_leaves] != true.leaf_middle[other_leaves]).sum()) + int(
        (mh[other_middles] != true.middle_high[other_middles]).sum()
    )
    if moved:
        bad.append(f"{moved} test-only leaves or middles were moved")
    if sorted(lm[dev_leaves].tolist()) != sorted(true.leaf_middle[dev_leaves].tolist()) or sorted(
        mh[dev_middles].tolist()
    ) != sorted(true.middle_high[dev_middles].tolist()):
        bad.append("group sizes differ from the true development taxonomy")
    leaf_fixed = int((lm[dev_leaves] == true.leaf_middle[dev_leaves]).sum())
    middle_fixed = int((mh[dev_middles] == true.middle_high[dev_middles]).sum())
    if (leaf_fixed, middle_fixed) != (r["leaf_min"], r["middle_min"]):
        bad.append(
            f"fixed points leaf->middle {leaf_fixed}, middle->high {middle_fixed}; the minimum is "
            f"{r['leaf_min']}, {r['middle_min']}"
        )
    for job_id, kind in store.rows("SELECT job_id, kind FROM jobs WHERE study_id = ? ORDER BY job_id", [study_id]):
        spec = JobSpec.read(layout.spec_path(job_dir(store.home, job_id)))
        short = job_id.split("/", 1)[1]
        if kind in TRAINING_KINDS and spec.train_taxonomy != r["path"]:
            bad.append(f"{short} does not train on the recorded shuffled taxonomy")
        if kind not in TRAINING_KINDS and spec.train_taxonomy is not None:
            bad.append(f"{short} ({kind}) was handed the shuffled taxonomy")
    summary = (
        f"seed {r['seed']}, training taxonomy {r['sha256'][:12]}: {len(dev_leaves)} development leaves and "
        f"{len(dev_middles)} middles shuffled, {len(other_leaves)} test-only leaves and {len(other_middles)} "
        f"middles unmoved; fixed points leaf->middle {leaf_fixed} (min {r['leaf_min']}), middle->high "
        f"{middle_fixed} (min {r['middle_min']}); validation and test read the true taxonomy"
    )
    return Check(name, not bad, _evidence(summary, bad))


def check_epoch_selection(store: Store, study_id: str) -> Check:
    """A study that selects its epoch froze one duration per arm, the candidate epoch with the best mean
    over seeds of the stored validation score (recomputed here), and test scored every seed of the arm at
    that epoch; a fixed-endpoint study scores its last epoch."""
    name = "epoch_selected_on_validation"
    preset = _registered(store, study_id)
    training = preset.training
    if not training.select_epoch:
        return Check(name, True, f"fixed endpoint: every cell is scored at epoch {training.epochs}")
    runs = _final_runs(store, study_id)
    if not runs or any(r["final_sha256"] is None for r in runs):
        return Check(name, None, "final runs not finished")
    stored = stored_durations(store, study_id)
    if not stored:
        return Check(name, None, "no duration frozen yet (the study is not locked)")
    recomputed, missing = arm_durations(store, study_id, preset)
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
    for arm, updates in store.rows(
        "SELECT r.arm, e.updates FROM epochs e JOIN runs r USING (run_id) JOIN arm_durations d "
        "ON d.study_id = r.study_id AND d.arm = r.arm AND d.epoch = e.epoch WHERE r.study_id = ? AND r.kind = ?",
        [study_id, JobKind.FINAL],
    ):
        reached[arm].add(updates)
    for r in runs:
        if r["arm"] in stored and not store.value(
            "SELECT count(*) FROM epochs WHERE run_id = ? AND epoch = ?", [r["run_id"], stored[r["arm"]].epoch]
        ):
            bad.append(f"{cell_name(r['run_id'])} never reached its arm's frozen epoch {stored[r['arm']].epoch}")
    bad += [f"{arm}: the seeds made {sorted(u)} updates by the frozen epoch" for arm, u in sorted(reached.items()) if len(u) > 1]
    # Selection saw no test sample: final runs fit the train part and validate on the validation split.
    with np.load(_split_path(store, study_id, split_files.VAL)) as z:
        val = set(np.concatenate([z["query"], z["gallery"]]).tolist())
    with np.load(_split_path(store, study_id, split_files.final_train_role(preset))) as z:
        overlap = len(val.intersection(z["fit"].tolist()))
    if overlap:
        bad.append(f"the final runs fit {overlap} validation samples they select on")
    evaluate = store.one("SELECT job_id FROM jobs WHERE study_id = ? AND kind = ?", [study_id, JobKind.EVALUATE])
    if evaluate is not None:
        spec = JobSpec.read(layout.spec_path(job_dir(store.home, evaluate[0])))
        for m in spec.models:
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
        f"({preset.evaluation.aggregation}), every seed scored at it, no test read: {_listed(shown)}"
    )
    return Check(name, not bad, _evidence(summary, bad))


def check_pca_fit(store: Store, study_id: str) -> Check:
    """The pca baseline was fitted on the final runs' training samples and on no official-test sample:
    the hash of the fitted indices its evaluation recorded is recomputed from the split files here."""
    name = "pca_fitted_on_training_only"
    preset = _registered(store, study_id)
    if PCA not in preset.evaluation.baselines:
        return Check(name, True, "no pca baseline")
    run_id = ids.baseline_run_id(study_id, PCA)
    row = store.one(
        "SELECT payload FROM events WHERE job_id = ? AND kind = ? ORDER BY ts DESC LIMIT 1",
        [ids.evaluate_job_id(study_id), EventKind.BASELINE_FIT],
    )
    if row is None:
        return Check(name, None, "the pca baseline has not been fitted")
    fit = json.loads(row[0])
    with np.load(_split_path(store, study_id, split_files.final_train_role(preset))) as z:
        expected = np.unique(z["fit"])
    with np.load(_split_path(store, study_id, split_files.PROTOCOL)) as z:
        test = z["test"]
    overlap = int(np.isin(expected, test).sum())
    bad = []
    if fit["run_id"] != run_id:
        bad.append(f"the fit was recorded for {fit['run_id']}, not {run_id}")
    if fit["fitted_sha256"] != index_sha256(expected):
        bad.append(
            f"fitted on samples with hash {fit['fitted_sha256'][:12]} ({fit['n_fitted']}), not the "
            f"{len(expected)} training samples of the final runs ({index_sha256(expected)[:12]})"
        )
    if fit["test_overlap"] or overlap:
        bad.append(f"{max(fit['test_overlap'], overlap)} fitted samples are official-test samples")
    summary = (
        f"{fit['dim_in']}-D -> {fit['dim_out']}-D on {fit['n_fitted']} training samples "
        f"(index hash {fit['fitted_sha256'][:12]}), none of the {len(test)} official-test samples"
    )
    return Check(name, not bad, _evidence(summary, bad))


def _tuning(store: Store, study_id: str, name: str) -> tuple[list[dict[str, Any]], Check | None]:
    """The tuning candidates' runs, or the check's result when there is nothing (yet) to compare: a study
    whose temperatures the preset fixes passes vacuously; one whose tuning has not finished is pending."""
    preset = _registered(store, study_id)
    tuned = preset.temperature.tuned_geometries
    if not tuned:
        return [], Check(name, True, "no temperature tuning: the preset fixes every temperature")
    states = [s for (s,) in store.rows("SELECT state FROM jobs WHERE study_id = ? AND kind = ?", [study_id, JobKind.TUNE])]
    runs = store.dicts(
        "SELECT * FROM runs WHERE study_id = ? AND kind = ? ORDER BY tau, arm", [study_id, JobKind.TUNE]
    )
    expected = len(preset.temperature.tuning.candidates) * len(tuned)
    if not states or any(s != JobState.FINISHED for s in states) or len(runs) < expected:
        return [], Check(name, None, f"temperature tuning not finished ({len(runs)} of {expected} candidate runs)")
    return runs, None


def check_final_runs_complete(store: Store, study_id: str) -> Check:
    """Every training seed x trained cell of the preset has exactly one final run, finished with a recorded
    final state that reloads exactly; no other final run exists."""
    name = "final_runs_complete"
    states = [s for (s,) in store.rows("SELECT state FROM jobs WHERE study_id = ? AND kind = ?", [study_id, JobKind.FINAL])]
    if not states or any(s != JobState.FINISHED for s in states):
        return Check(name, None, "final runs not finished")
    preset = _registered(store, study_id)
    cells = [*preset.cells, *([HIER_STYLE] if HIER_STYLE in preset.evaluation.baselines else [])]
    expected = {(seed, arm) for seed in preset.training.seeds for arm in cells}
    runs = _final_runs(store, study_id)
    have = {(r["seed"], r["arm"]): r for r in runs}
    bad = [f"seed {seed} has no final run of {arm}" for seed, arm in sorted(expected.difference(have))]
    bad += [f"{cell_name(r['run_id'])} is not a cell of the preset" for k, r in sorted(have.items()) if k not in expected]
    bad += [f"{cell_name(r['run_id'])} has no recorded final state" for r in runs if r["final_sha256"] is None]
    verified = sum(
        1 for k, r in have.items() if k in expected and r["final_sha256"] is not None and r["reload_max_diff"] == 0.0
    )
    summary = (
        f"{verified}/{len(expected)} final runs verified ({counted(len(preset.training.seeds), 'seed')} x "
        f"{counted(len(cells), 'cell')}: final state recorded, reload exact)"
    )
    if verified < len(expected) and not bad:
        bad.append("a final run does not reload exactly (see checkpoint_reload_exact)")
    return Check(name, not bad, _evidence(summary, bad))


def check_tuning_init(store: Store, study_id: str) -> Check:
    """Every temperature candidate (of either geometry) starts from one trainable initial state."""
    name = "tuning_same_init"
    runs, early = _tuning(store, study_id, name)
    if early is not None:
        return early
    common, odd = _majority(runs, itemgetter("init_sha256"))
    bad = [
        f"{cell_name(r['run_id'])} starts from {str(r['init_sha256'])[:12]}, the other candidates from {common[:12]}"
        for r in odd
    ]
    summary = f"{len(runs)} candidate runs: initial-state SHA256s {sorted({str(r['init_sha256'])[:12] for r in runs})}"
    return Check(name, not bad, _evidence(summary, bad))


def check_tuning_batch_order(store: Store, study_id: str) -> Check:
    """Every temperature candidate sees the same batches in the same order, with the same update count."""
    name = "tuning_same_batch_order"
    runs, early = _tuning(store, study_id, name)
    if early is not None:
        return early
    rows = store.dicts(
        "SELECT e.epoch, r.run_id, e.batch_sha256, e.updates FROM epochs e JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? ORDER BY e.epoch, r.run_id",
        [study_id, JobKind.TUNE],
    )
    by_epoch: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_epoch[r["epoch"]].append(r)
    bad = [f"{cell_name(r['run_id'])} recorded no training epoch" for r in runs if not any(
        x["run_id"] == r["run_id"] for x in rows
    )]  # fmt: skip
    for epoch, cells in sorted(by_epoch.items()):
        if len(cells) != len(runs):
            bad.append(f"epoch {epoch}: {len(cells)} of {len(runs)} candidate runs recorded it")
        for column, what in (("batch_sha256", "batch order"), ("updates", "update count")):
            common, odd = _majority(cells, itemgetter(column))
            bad += [
                f"epoch {epoch}: {cell_name(r['run_id'])} {what} {str(r[column])[:12]}, the other candidates "
                f"{str(common)[:12]}"
                for r in odd
            ]
    summary = (
        f"{len(runs)} candidate runs over {counted(len(by_epoch), 'epoch')}: one batch-order SHA256 and one "
        "update count per epoch"
    )
    return Check(name, not bad, _evidence(summary, bad))


def check_tuning_parameters(store: Store, study_id: str) -> Check:
    """Every temperature candidate trains the same number of parameters, the final cells' count."""
    name = "tuning_same_parameters"
    runs, early = _tuning(store, study_id, name)
    if early is not None:
        return early
    row = store.one(
        "SELECT d.dim FROM studies s JOIN datasets d USING (dataset_id) WHERE s.study_id = ?", [study_id]
    )
    assert row is not None  # a study with tuning runs has its dataset
    training = _preset(store, study_id)["training"]
    expected = expected_trainable(row[0], training["hidden"], training["out_dim"])
    bad = [f"{cell_name(r['run_id'])} has {r['trainable_params']:,}" for r in runs if r["trainable_params"] != expected]
    summary = (
        f"{len(runs)} candidate runs: {sorted({r['trainable_params'] for r in runs})} trainable parameters; "
        f"expected {expected:,} for {row[0]}-D input"
    )
    return Check(name, not bad, _evidence(summary, bad))


def _job_name(job_id: str) -> str:
    return job_id.split("/", 1)[1]


def check_tuning_checkpoints_not_reused(store: Store, study_id: str) -> Check:
    """No tuning state reaches a final or the test: no final job is handed a file of a tuning job's
    folder, no final run ends in a candidate's end state, and evaluation loads final jobs' files only."""
    name = "tuning_checkpoints_not_reused"
    finals = _final_runs(store, study_id)
    if not finals or any(r["final_sha256"] is None for r in finals):
        return Check(name, None, "final runs not finished")
    tune_dirs = {
        job_id: str(job_dir(store.home, job_id))
        for (job_id,) in store.rows("SELECT job_id FROM jobs WHERE study_id = ? AND kind = ?", [study_id, JobKind.TUNE])
    }
    ends = {r["final_sha256"]: r["run_id"] for r in store.dicts(
        "SELECT run_id, final_sha256 FROM runs WHERE study_id = ? AND kind = ? AND final_sha256 IS NOT NULL",
        [study_id, JobKind.TUNE],
    )}  # fmt: skip
    bad = []

    def tuning_folder(path: str | None) -> str | None:
        if path is None:
            return None
        full = str(resolve(store.home, path))
        return next((_job_name(j) for j, d in tune_dirs.items() if full == d or full.startswith(d + "/")), None)

    final_jobs = sorted({r["job_id"] for r in finals})
    for job_id in final_jobs:
        spec = JobSpec.read(layout.spec_path(job_dir(store.home, job_id)))
        for what, path in (("output folder", spec.out_dir), ("train split", spec.train_split), ("val split", spec.val_split)):
            source = tuning_folder(path)
            if source is not None:
                bad.append(f"{_job_name(job_id)} was given its {what} in tuning job {source}'s folder")
    bad += [
        f"{cell_name(r['run_id'])} ends in the state of tuning run {cell_name(ends[r['final_sha256']])}"
        for r in finals
        if r["final_sha256"] in ends
    ]
    scored = 0
    evaluate = store.one("SELECT job_id FROM jobs WHERE study_id = ? AND kind = ?", [study_id, JobKind.EVALUATE])
    if evaluate is not None:
        spec = JobSpec.read(layout.spec_path(job_dir(store.home, evaluate[0])))
        own = {str(job_dir(store.home, j)) for j in final_jobs}
        for m in spec.models:
            scored += 1
            weights = str(resolve(store.home, m.weights))
            source = tuning_folder(m.weights)
            if source is not None:
                bad.append(f"evaluation scores {cell_name(m.run_id)} from tuning job {source}'s folder")
            elif not any(weights.startswith(d + "/") for d in own):
                bad.append(f"evaluation scores {cell_name(m.run_id)} from {m.weights}, outside the final jobs' folders")
    summary = (
        f"{len(tune_dirs)} tuning and {len(final_jobs)} final jobs: no final job reads a tuning folder, no final "
        f"state equals one of {counted(len(ends), 'candidate end state')}"
        + (f", all {counted(scored, 'scored model')} load final jobs' files" if evaluate is not None else "")
    )
    return Check(name, not bad, _evidence(summary, bad))


def check_finals_from_scratch(store: Store, study_id: str) -> Check:
    """Every final run trained from a fresh initialisation: its epochs run from 1 with one epoch's updates
    each (none continues a run that had already trained), and a final run of the tuning seed starts from the
    candidates' own fresh initial state."""
    name = "finals_retrained_from_scratch"
    finals = _final_runs(store, study_id)
    if not finals or any(r["final_sha256"] is None for r in finals):
        return Check(name, None, "final runs not finished")
    preset = _registered(store, study_id)
    with np.load(_split_path(store, study_id, split_files.final_train_role(preset))) as z:
        n = len(z["fit"])
    t = preset.training
    per_epoch = n // t.batch_size if t.drop_last else -(-n // t.batch_size)
    epochs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for run_id, epoch, updates in store.rows(
        "SELECT e.run_id, e.epoch, e.updates FROM epochs e JOIN runs r USING (run_id) WHERE r.study_id = ? "
        "AND r.kind = ? ORDER BY e.run_id, e.epoch",
        [study_id, JobKind.FINAL],
    ):
        epochs[run_id].append((epoch, updates))
    hier = _authors_hier(store, study_id)
    bad = []
    for r in finals:
        seen = epochs.get(r["run_id"], [])
        if [e for e, _ in seen] != list(range(1, t.epochs + 1)):
            bad.append(f"{cell_name(r['run_id'])} recorded epochs {[e for e, _ in seen][:3]}..., not 1 to {t.epochs}")
            continue
        own = n // hier.batch_size if hier is not None and r["arm"] == HIER_STYLE else per_epoch
        off = [(e, u) for e, u in seen if u != e * own]
        if off:
            e, u = off[0]
            bad.append(f"{cell_name(r['run_id'])} had made {u} updates by epoch {e}, not {e} x {own}")
    tuning = store.rows(
        "SELECT DISTINCT init_sha256 FROM runs WHERE study_id = ? AND kind = ?", [study_id, JobKind.TUNE]
    )
    seed = preset.temperature.tuning.seed
    shared = ""
    if len(tuning) == 1 and seed in t.seeds:
        fresh = tuning[0][0]
        bad += [
            f"{cell_name(r['run_id'])} starts from {str(r['init_sha256'])[:12]}, not the fresh seed-{seed} state "
            f"{fresh[:12]} the tuning candidates started from"
            for r in finals
            if r["seed"] == seed and r["init_sha256"] != fresh and not (hier is not None and r["arm"] == HIER_STYLE)
        ]
        shared = f"; seed {seed} starts from the tuning candidates' fresh state {fresh[:12]}"
        if hier is not None:
            shared += f" ({HIER_STYLE} from its own head's: {HIER_AUTHORS_EXEMPT})"
    hier_rate = "" if hier is None else f", {HIER_STYLE} {n // hier.batch_size} (authors' recipe)"
    summary = (
        f"{len(finals)} final cells trained epochs 1 to {t.epochs} from zero updates ({per_epoch} per epoch{hier_rate})"
        f"{shared}"
    )
    return Check(name, not bad, _evidence(summary, bad))


def check_lock_hash(store: Store, study_id: str) -> Check:
    """The lock hash recomputed from what the store and the job folders hold now equals the one recorded at
    the lock: no final state, split, frozen duration or scored checkpoint changed after it."""
    name = "lock_hash_matches"
    row = store.one("SELECT lock_sha256, preset_sha256 FROM studies WHERE study_id = ?", [study_id])
    assert row is not None  # audits run on a registered study
    locked, preset_sha = row
    if locked is None:
        return Check(name, None, "the study is not locked")
    durations = {arm: d.epoch for arm, d in stored_durations(store, study_id).items()}
    digest, missing = lock_digest(store, study_id, _registered(store, study_id), preset_sha, durations)
    bad = list(missing)
    if digest != locked:
        bad.append(f"recomputed {digest[:12]}, recorded at the lock {locked[:12]}")
    return Check(name, not bad, _evidence(f"lock hash {locked[:12]} over the preset, splits and final states", bad))


def _split_rows(store: Store, study_id: str) -> dict[str, dict[str, Any]]:
    """Role -> {"sizes": part sizes, "params": generator parameters}, as recorded at creation."""
    return {
        role: {"sizes": json.loads(sizes), "params": json.loads(params)}
        for role, sizes, params in store.rows(
            "SELECT role, sizes, params FROM splits WHERE study_id = ? ORDER BY role", [study_id]
        )
    }


def realised_counts(store: Store, study_id: str) -> dict[str, Any]:
    """The study's counts under the names of `[expected]` (config.preset.ExpectedConfig), from the
    splits and dataset recorded at creation, so the check needs no training."""
    preset = _registered(store, study_id)
    rows = _split_rows(store, study_id)
    protocol = rows[split_files.PROTOCOL]
    tuning = rows[split_files.TUNING]["sizes"]
    qg = [r["sizes"] for role, r in rows.items() if role.startswith(split_files.QG_PREFIX)]
    # The final-train rows record the protocol's part sizes; what a run fits is in the split file.
    def fitted(role: str) -> int:
        with np.load(_split_path(store, study_id, role)) as z:
            return len(z["fit"])

    n_fit = fitted(split_files.final_train_role(preset))
    t = preset.training
    info = store.one(
        "SELECT d.n_leaf, d.n_middle, d.n_high FROM studies s JOIN datasets d USING (dataset_id) "
        "WHERE s.study_id = ?",
        [study_id],
    )
    assert info is not None  # a registered study has its dataset

    def per_part(level: str) -> list[int] | None:
        groups = protocol["params"].get(f"{level}_groups")
        return None if groups is None else [int(groups.get(p, 0)) for p in ("train", "val", "test")]

    def one(values: set[int]) -> int | list[int]:
        # Every Q/G perturbation must agree; several values are shown as they are.
        return values.pop() if len(values) == 1 else sorted(values)

    return {
        "development_images": fitted(split_files.FINAL_TRAIN),
        "test_images": int(protocol["sizes"].get("test", 0)),
        "query_images": one({int(q["query"]) for q in qg}),
        "gallery_images": one({int(q["gallery"]) for q in qg}),
        "tuning_fit_images": int(tuning["fit"]),
        "tuning_query_images": int(tuning["query"]),
        "tuning_gallery_images": int(tuning["gallery"]),
        "updates_per_epoch": n_fit // t.batch_size if t.drop_last else -(-n_fit // t.batch_size),
        "leaves": int(info[0]),
        "middle_groups": int(info[1]),
        "high_groups": int(info[2]),
        "part_leaves": per_part("leaf"),
        "part_middle_groups": per_part("middle"),
    }


def check_expected_counts(store: Store, study_id: str) -> Check:
    """The preset's `[expected]` counts against the realised split: a study drawn over other images than
    the protocol's (e.g. all of NABirds instead of its 19,021 + 5,017 bundle) fails here before training."""
    declared = {
        k: (list(v) if isinstance(v, tuple) else v)
        for k, v in _registered(store, study_id).expected.declared().items()
    }
    if not declared:
        return Check("expected_counts", True, "the preset declares no expected counts ([expected] is empty)")
    realised = realised_counts(store, study_id)
    bad = [f"{k} is {realised[k]}, expected {v}" for k, v in declared.items() if realised[k] != v]
    summary = f"{len(declared) - len(bad)} of {len(declared)} declared counts match"
    # At most 13 counts: every offender is named, not the first few.
    return Check("expected_counts", not bad, "; ".join([summary, *bad]))


CHECKS: tuple[Callable[[Store, str], Check], ...] = (
    check_expected_counts,
    check_parameters,
    check_same_init,
    check_batch_order,
    check_update_budget,
    check_hier_authors_recipe,
    check_reload,
    check_ball,
    check_qg_identical,
    check_test_after_lock,
    check_tuning_isolated,
    check_threads,
    check_taxonomy_shuffle,
    check_epoch_selection,
    check_pca_fit,
    check_final_runs_complete,
    check_tuning_init,
    check_tuning_batch_order,
    check_tuning_parameters,
    check_tuning_checkpoints_not_reused,
    check_finals_from_scratch,
    check_lock_hash,
)

if TYPE_CHECKING:
    import duckdb  # write callbacks are handed a connection by Store.write; only study.db opens one


def record(store: Store, study_id: str, checks: Iterable[Check]) -> None:
    """Store the checks' results (replacing earlier ones of the same name)."""
    checks = list(checks)

    def write(con: duckdb.DuckDBPyConnection) -> None:
        for c in checks:
            con.execute(
                "INSERT OR REPLACE INTO audits (study_id, check_name, ok, evidence) VALUES (?, ?, ?, ?)",
                [study_id, c.name, c.ok, c.evidence],
            )

    store.write(write)


def run_audits(store: Store, study_id: str, *, save: bool = True) -> list[Check]:
    """Every check of the study, computed from the stored evidence; `save` records the results."""
    checks = [fn(store, study_id) for fn in CHECKS]
    if save:
        record(store, study_id, checks)
    return checks


def stored_audits(store: Store, study_id: str) -> list[Check]:
    return [
        Check(name, ok, ev)
        for name, ok, ev in store.rows(
            "SELECT check_name, ok, evidence FROM audits WHERE study_id = ? ORDER BY check_name", [study_id]
        )
    ]
