"""Fairness and leakage audits of a study, each a stored (check, ok, evidence) row.

A check is pending (ok = null) until the evidence it needs exists; it never passes on missing data.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hierconsole.storage import Store

NORM_TOLERANCE = 1e-6  # float32 rounding of the analytic bound


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    evidence: str


def expected_trainable(in_dim: int, hidden: int = 256, out_dim: int = 32) -> int:
    """Linear(d, h) + BatchNorm1d(h) affine + Linear(h, o): 205,600 at d=768."""
    return in_dim * hidden + hidden + 2 * hidden + hidden * out_dim + out_dim


def _final_runs(store: Store, study_id: str) -> list[dict]:
    return store.dicts(
        "SELECT * FROM runs WHERE study_id = ? AND kind = 'final' ORDER BY seed, arm", [study_id]
    )


def _preset(store: Store, study_id: str) -> dict:
    """The study's registered preset as stored (its canonical JSON), not as the shipped file reads now."""
    return json.loads(store.one("SELECT preset FROM studies WHERE study_id = ?", [study_id])[0])


def check_parameters(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs:
        return Check("trainable_parameters", None, "no final runs yet")
    dim = store.one(
        "SELECT d.dim FROM studies s JOIN datasets d USING (dataset_id) WHERE s.study_id = ?", [study_id]
    )[0]
    preset = _preset(store, study_id)
    expected = expected_trainable(dim, preset["training"]["hidden"], preset["training"]["out_dim"])
    counts = {r["run_id"]: r["trainable_params"] for r in runs}
    ok = len(set(counts.values())) == 1 and next(iter(counts.values())) == expected
    return Check(
        "trainable_parameters",
        ok,
        f"{len(counts)} cells: {sorted(set(counts.values()))} trainable parameters; expected {expected:,} "
        f"for {dim}-D input",
    )


def check_same_init(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs:
        return Check("same_init_within_seed", None, "no final runs yet")
    by_seed: dict[int, set[str]] = defaultdict(set)
    for r in runs:
        by_seed[r["seed"]].add(r["init_sha256"])
    bad = {s: len(h) for s, h in by_seed.items() if len(h) != 1}
    ev = "; ".join(f"seed {s}: {next(iter(h))[:12]}" for s, h in sorted(by_seed.items()) if len(h) == 1)
    return Check(
        "same_init_within_seed",
        not bad,
        f"distinct initial-state hashes per seed: {bad}"
        if bad
        else f"one initial-state SHA256 per seed ({ev})",
    )


def check_batch_order(store: Store, study_id: str) -> Check:
    rows = store.dicts(
        "SELECT r.seed, e.epoch, count(DISTINCT e.batch_sha256) AS hashes, count(*) AS cells, "
        "count(DISTINCT e.updates) AS update_counts, min(e.updates) AS updates "
        "FROM epochs e JOIN runs r USING (run_id) WHERE r.study_id = ? AND r.kind = 'final' "
        "GROUP BY r.seed, e.epoch ORDER BY r.seed, e.epoch",
        [study_id],
    )
    if not rows:
        return Check("same_batch_order", None, "no training epochs yet")
    bad = [(r["seed"], r["epoch"]) for r in rows if r["hashes"] != 1 or r["update_counts"] != 1]
    return Check(
        "same_batch_order",
        not bad,
        f"cells disagree in batch order or update count at (seed, epoch) {bad[:5]}"
        if bad
        else f"{len(rows)} (seed, epoch) pairs: one batch-order SHA256 and one update count across cells each",
    )


def check_update_budget(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs or any(r["updates"] is None for r in runs):
        return Check("update_budget", None, "final runs not finished")
    preset = _preset(store, study_id)
    path = store.one("SELECT path FROM splits WHERE study_id = ? AND role = 'final_train'", [study_id])[0]
    with np.load(path) as z:
        n = len(z["fit"])
    t = preset["training"]
    per_epoch = n // t["batch_size"] if t["drop_last"] else -(-n // t["batch_size"])
    expected = per_epoch * t["epochs"]
    counts = sorted({r["updates"] for r in runs})
    return Check(
        "update_budget",
        counts == [expected],
        f"updates per cell {counts}; expected floor({n}/{t['batch_size']}) x {t['epochs']} = {expected}",
    )


def check_reload(store: Store, study_id: str) -> Check:
    runs = _final_runs(store, study_id)
    if not runs or any(r["reload_max_diff"] is None for r in runs):
        return Check("checkpoint_reload_exact", None, "final runs not finished")
    worst = max(r["reload_max_diff"] for r in runs)
    return Check(
        "checkpoint_reload_exact",
        worst == 0.0,
        f"max |diff| of the reloaded verification sample over {len(runs)} cells: {worst:g}",
    )


def check_ball(store: Store, study_id: str) -> Check:
    runs = [r for r in _final_runs(store, study_id) if r["geometry"] == "poincare"]
    if not runs or any(r["max_norm"] is None for r in runs):
        return Check("hyperbolic_norms_in_ball", None, "no official-test hyperbolic embeddings yet")
    worst = max(runs, key=lambda r: r["max_norm"])
    ok = all(
        r["max_norm"] < r["ball_radius"] and r["max_norm"] <= r["norm_bound"] + NORM_TOLERANCE for r in runs
    )
    return Check(
        "hyperbolic_norms_in_ball",
        ok,
        f"max norm {worst['max_norm']:.6f} ({worst['run_id']}); ball radius {worst['ball_radius']:.4f}, "
        f"analytic bound {worst['norm_bound']:.6f}",
    )


def check_qg_identical(store: Store, study_id: str) -> Check:
    rows = store.dicts(
        "SELECT perturbation, count(DISTINCT run_id) AS runs FROM metrics "
        "WHERE study_id = ? AND NOT posthoc GROUP BY perturbation ORDER BY perturbation",
        [study_id],
    )
    splits = dict(
        store.rows("SELECT role, sha256 FROM splits WHERE study_id = ? AND role LIKE 'qg:%'", [study_id])
    )
    if not rows:
        return Check("qg_splits_identical", None, "no official-test metrics yet")
    n_final = len(_final_runs(store, study_id))
    ok = all(r["runs"] == n_final for r in rows) and len(rows) == len(splits)
    ev = ", ".join(f"{role} {sha[:12]}" for role, sha in sorted(splits.items()))
    return Check(
        "qg_splits_identical",
        ok,
        f"every one of {n_final} final cells evaluated on the same {len(splits)} Q/G splits ({ev}); "
        f"cells per split: {[r['runs'] for r in rows]}",
    )


def check_test_after_lock(store: Store, study_id: str) -> Check:
    row = store.dicts("SELECT locked_at, test_first_read_at FROM studies WHERE study_id = ?", [study_id])[0]
    last_final = store.one(
        "SELECT max(finished_at), count(*) FILTER (WHERE state <> 'finished') FROM jobs "
        "WHERE study_id = ? AND kind = 'final'",
        [study_id],
    )
    if row["test_first_read_at"] is None:
        return Check("test_read_after_lock", None, "the official test split has not been read")
    ok = (
        row["locked_at"] is not None
        and row["test_first_read_at"] >= row["locked_at"]
        and last_final[1] == 0
        and last_final[0] <= row["locked_at"]
    )
    return Check(
        "test_read_after_lock",
        ok,
        f"last final run finished {last_final[0]}, locked {row['locked_at']}, test first read "
        f"{row['test_first_read_at']}",
    )


def check_tuning_isolated(store: Store, study_id: str) -> Check:
    """No training or tuning job was handed an official-test index."""
    roles = dict(store.rows("SELECT role, path FROM splits WHERE study_id = ?", [study_id]))
    with np.load(roles["protocol"]) as z:
        test = set(z["test"].tolist())
    jobs = store.dicts(
        "SELECT job_id, kind FROM jobs WHERE study_id = ? AND kind IN ('tune', 'final')", [study_id]
    )
    if not jobs:
        return Check("tuning_never_read_test", None, "no jobs yet")
    from hierconsole.jobspec import JobSpec
    from hierconsole.studies import job_dir

    leaks = []
    for job in jobs:
        spec = JobSpec.read(job_dir(store, job["job_id"]) / "spec.json")
        if any(role.startswith("qg:") for role in spec.splits):
            leaks.append(f"{job['job_id']} holds a test perturbation")
        for role, path in spec.splits.items():
            with np.load(path) as z:
                for part in z.files:
                    n = len(test.intersection(z[part].tolist()))
                    if n:
                        leaks.append(f"{job['job_id']} {role}.{part}: {n} test indices")
    n_tune = sum(j["kind"] == "tune" for j in jobs)
    return Check(
        "tuning_never_read_test",
        not leaks,
        "; ".join(leaks[:5])
        if leaks
        else f"{n_tune} tuning and {len(jobs) - n_tune} final jobs: "
        f"no index of the {len(test)} official-test samples in any split they were given",
    )


def check_threads(store: Store, study_id: str) -> Check:
    rows = store.rows(
        "SELECT DISTINCT threads, device FROM jobs WHERE study_id = ? AND kind = 'final'", [study_id]
    )
    if not rows:
        return Check("fixed_thread_count", None, "no final jobs yet")
    return Check(
        "fixed_thread_count",
        len(rows) == 1,
        f"final jobs ran with (threads, device) {sorted(rows)}: bitwise determinism holds for a fixed count",
    )


CHECKS: tuple[Callable[[Store, str], Check], ...] = (
    check_parameters,
    check_same_init,
    check_batch_order,
    check_update_budget,
    check_reload,
    check_ball,
    check_qg_identical,
    check_test_after_lock,
    check_tuning_isolated,
    check_threads,
)


def run_audits(store: Store, study_id: str) -> list[Check]:
    checks = [fn(store, study_id) for fn in CHECKS]

    def write(con) -> None:
        for c in checks:
            con.execute(
                "INSERT OR REPLACE INTO audits (study_id, check_name, ok, evidence) VALUES (?, ?, ?, ?)",
                [study_id, c.name, c.ok, c.evidence],
            )

    store.write(write)
    return checks


def stored_audits(store: Store, study_id: str) -> list[Check]:
    return [
        Check(name, ok, ev)
        for name, ok, ev in store.rows(
            "SELECT check_name, ok, evidence FROM audits WHERE study_id = ? ORDER BY check_name", [study_id]
        )
    ]
