"""A store with fixed, fabricated studies for the console tests and snapshots.

The evidence goes through the real ingest (`apply_events`) and the real phase logic (`advance`: lock,
evaluation job, audits), only the worker is skipped: its events are written here with fixed values, fixed
times and fixed study ids, so every screen renders the same on every machine. One cell of the complete
study reports a wrong update count, so the real `update_budget` audit fails on it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hierconsole.contract.events import from_record
from hierconsole.datasets import FeatureSet
from hierconsole.levels import PAPER_CODES as LEVELS
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.run.ingest import JobRef, apply_events
from hierconsole.study.run.lifecycle import advance, create_study
from hierconsole.vocabulary import JobKind
from tests.tiny import tiny_preset

COMPLETE = "demo-complete"
LIVE = "demo-live"
SEEDS = (42, 2024, 3407)
ARMS = ("E_R", "H_R", "E_S", "H_S")
EPOCHS = 5
UPDATES = 8 * EPOCHS  # floor(260 / 32) updates per epoch on the tiny train split
T0 = 1_800_000_000.0
PARAMS = 48 * 32 + 32 + 2 * 32 + 32 * 8 + 8  # the tiny projector: Linear, BatchNorm affine, Linear

# Mean-hierarchy-style offsets per arm and level: H_S gains at high and loses at leaf and middle.
ARM_BASE = {"E_R": 0.40, "H_R": 0.41, "E_S": 0.44, "H_S": 0.445}
LEVEL_SHIFT = {
    "E_R": {"leaf": 0.00, "middle": 0.00, "high": 0.00},
    "H_R": {"leaf": 0.004, "middle": 0.002, "high": 0.006},
    "E_S": {"leaf": 0.03, "middle": 0.02, "high": 0.01},
    "H_S": {"leaf": 0.018, "middle": 0.012, "high": 0.025},
}
SEED_SHIFT = {42: 0.0, 2024: 0.003, 3407: -0.002}


def _loss(arm: str, epoch: int, seed: int) -> float:
    start = 0.3 if arm.endswith("_R") else 3.9
    return round(
        start * (0.85**epoch) + 0.001 * (SEED_SHIFT[seed] * 100) + (0.01 if arm[0] == "H" else 0.0), 6
    )


def training_events(
    seed: int, epochs: int, *, updates: dict[str, int] | None = None, finish: bool = True
) -> list:
    ts = T0 + seed
    events = [{"kind": "start", "key": "start:1", "pid": 1, "device": "cpu", "threads": 1, "ts": ts}]
    geometry = {"E": "euclidean", "H": "poincare"}
    loss = {"R": "regression", "S": "supcon"}
    for arm in ARMS:
        events.append(
            {
                "kind": "init",
                "key": f"init:{arm}",
                "cell": arm,
                "arm": arm,
                "tau": 0.2 if arm.endswith("_S") else None,
                "geometry": geometry[arm[0]],
                "loss": loss[arm[-1]],
                "trainable_params": PARAMS,
                "init_sha256": f"init-{seed}",
                "ts": ts + 1,
            }
        )
    for epoch in range(1, epochs + 1):
        for arm in ARMS:
            events.append(
                {
                    "kind": "epoch",
                    "key": f"epoch:{arm}:{epoch}",
                    "cell": arm,
                    "epoch": epoch,
                    "epochs": EPOCHS,
                    "train_loss": _loss(arm, epoch, seed),
                    "updates": 8 * epoch,
                    "batch_sha256": f"batches-{seed}-{epoch}",
                    "seconds": 1.5,
                    "ts": ts + 1 + 1.5 * epoch,
                }
            )
    if not finish:
        return events
    for arm in ARMS:
        events.append(
            {
                "kind": "final",
                "key": f"final:{arm}",
                "cell": arm,
                "final_sha256": f"final-{seed}-{arm}",
                "updates": (updates or {}).get(arm, UPDATES),
                "reload_max_diff": 0.0,
                "best_epoch": -1,
                "best_score": None,
                "ts": ts + 20,
            }
        )
    events.append({"kind": "done", "key": "done", "ts": ts + 21})
    return events


def metric_value(arm: str, seed: int, level: str, measure: str, perturbation: int) -> float:
    # A small arm-by-seed wobble, so effects differ between seeds and their SDs are not zero.
    wobble = 0.002 * ((seed // 7 + 3 * ARMS.index(arm)) % 5 - 2)
    base = ARM_BASE[arm] + LEVEL_SHIFT[arm][level] + SEED_SHIFT[seed] + wobble + 0.001 * (perturbation % 7)
    if measure == "mAP":
        return round(base - 0.1 * LEVELS.index(level), 6)
    k = int(measure[2:])
    return round(min(1.0, base + 0.05 * k**0.5), 6)


def evaluation_events(study_id: str) -> list:
    events = []
    for seed in SEEDS:
        for arm in ARMS:
            run_id = f"{study_id}/final-s{seed}/{arm}"
            if arm[0] == "H":
                events.append(
                    {
                        "kind": "norms",
                        "key": f"norms:{run_id}",
                        "run_id": run_id,
                        "max_norm": 0.31,
                        "radius": 1.0,
                        "bound": 0.379949,
                        "ts": T0 + 100,
                    }
                )
            for pert in SEEDS:
                metrics = {
                    level: {
                        **{
                            m: metric_value(arm, seed, level, m, pert)
                            for m in ("mAP", "R@1", "R@5", "R@10", "R@20")
                        },
                        "valid_queries": 40.0,
                    }
                    for level in LEVELS
                }
                events.append(
                    {
                        "kind": "metrics",
                        "key": f"metrics:{run_id}:{pert}:micro",
                        "run_id": run_id,
                        "seed": seed,
                        "arm": arm,
                        "perturbation": pert,
                        "aggregation": "micro",
                        "posthoc": False,
                        "metrics": metrics,
                        "ts": T0 + 100 + pert % 10,
                    }
                )
    return events


def _apply(store: Store, job_id: str, study_id: str, kind: str, seed: int, events: list) -> None:
    """Ingest fabricated events, each read through the event schema as a worker's line would be."""
    job = JobRef(job_id, study_id, JobKind(kind), seed)
    store.write(lambda con: apply_events(con, job, [from_record(e) for e in events]))


def _set_job(store: Store, job_id: str, state: str, error: str | None = None) -> None:
    store.execute(
        "UPDATE jobs SET state = ?, error = ?, attempts = 1, started_at = TIMESTAMP '2027-01-15 10:00:00', "
        "finished_at = CASE WHEN ? IN ('finished', 'crashed') THEN TIMESTAMP '2027-01-15 10:01:00' END "
        "WHERE job_id = ?",
        [state, error, state, job_id],
    )


def _study(store: Store, study_id: str, monkeypatch: pytest.MonkeyPatch, values: dict | None = None) -> str:
    """A new study of the tiny dataset under a fixed id, with `values` over the pinned preset values."""
    monkeypatch.setattr("hierconsole.study.run.lifecycle.new_study_id", lambda preset: study_id)
    # Everything the fabricated evidence relies on is pinned here, not inherited from the shipped preset.
    pinned = {
        "evaluation.qg_seeds": list(SEEDS),
        "evaluation.aggregation": "micro",
        "temperature.euclidean": 0.2,
        "temperature.poincare": 0.2,
        "training.drop_last": True,
        "compute.max_parallel_jobs": 2,
        **(values or {}),
    }
    return create_study(store, tiny_preset(epochs=EPOCHS, seeds=SEEDS, **pinned), "tiny")


def build_store(home: Path, tiny_fs: FeatureSet) -> None:
    """Two studies: one complete (with a failed audit), then a newer one still training."""
    with Store(home) as store, pytest.MonkeyPatch.context() as mp:
        register_dataset(store, tiny_fs)
        sid = _study(store, COMPLETE, mp)
        for seed in SEEDS:
            job = f"{sid}/final-s{seed}"
            updates = {"H_S": UPDATES - 1} if seed == 2024 else None
            _apply(store, job, sid, "final", seed, training_events(seed, EPOCHS, updates=updates))
            _set_job(store, job, "finished")
        assert advance(store, sid) == "evaluating"
        store.execute(
            "UPDATE studies SET locked_at = TIMESTAMP '2027-01-15 10:02:00', "
            "test_first_read_at = TIMESTAMP '2027-01-15 10:03:00' WHERE study_id = ?",
            [sid],
        )
        _apply(store, f"{sid}/evaluate", sid, "evaluate", 0, evaluation_events(sid))
        _set_job(store, f"{sid}/evaluate", "finished")
        assert advance(store, sid) == "complete"

        live = _study(store, LIVE, mp)
        _apply(store, f"{live}/final-s42", live, "final", 42, training_events(42, EPOCHS))
        _set_job(store, f"{live}/final-s42", "finished")
        _apply(store, f"{live}/final-s2024", live, "final", 2024, training_events(2024, 3, finish=False))
        _set_job(store, f"{live}/final-s2024", "running")
        _apply(store, f"{live}/final-s3407", live, "final", 3407, training_events(3407, 2, finish=False))
        _set_job(
            store,
            f"{live}/final-s3407",
            "crashed",
            "worker PID 4242 is gone (orchestrator restarted); resume it with `hierconsole resume`",
        )


def shifted_events(events: list, shift: float) -> list:
    """Every metric + `shift`, and a little more for some seeds, so contrasts between members have a spread."""
    out = []
    for e in events:
        if e["kind"] == "metrics" and shift:
            s = shift + 0.0015 * (SEEDS.index(e["seed"]) % 2) * (1 if shift > 0 else -1)
            e = {**e, "metrics": {lv: {m: (v + s if m != "valid_queries" else v) for m, v in ms.items()} for lv, ms in e["metrics"].items()}}
        out.append(e)
    return out


def complete_study(store: Store, study_id: str, mp: pytest.MonkeyPatch, values: dict, shift: float = 0.0) -> str:
    """A complete study like the fixed one, with extra preset values and every metric shifted."""
    sid = _study(store, study_id, mp, values)
    for seed in SEEDS:
        job = f"{sid}/final-s{seed}"
        _apply(store, job, sid, "final", seed, training_events(seed, EPOCHS))
        _set_job(store, job, "finished")
    assert advance(store, sid) == "evaluating"
    _apply(store, f"{sid}/evaluate", sid, "evaluate", 0, shifted_events(evaluation_events(sid), shift))
    _set_job(store, f"{sid}/evaluate", "finished")
    assert advance(store, sid) == "complete"
    return sid

def add_tuning(
    store: Store, study_id: str, geometry: str, tau: float, maps: dict[str, float | None], score: float, status: str | None
) -> None:
    """Record a tuning candidate: its score and status, and its mAP at each hier level (code -> value)."""

    def write(con) -> None:
        con.execute("INSERT INTO tuning VALUES (?, ?, ?, ?, ?)", [study_id, geometry, tau, score, status])
        con.executemany(
            "INSERT INTO tuning_levels VALUES (?, ?, ?, ?, ?)", [[study_id, geometry, tau, lv, v] for lv, v in maps.items()]
        )

    store.write(write)


def add_family(store: Store, name: str, members: dict[str, tuple[str, dict]], contrasts: list[dict]) -> str:
    """Record a family over complete studies: member -> (study id, its overrides), in order; its id."""
    family_id = f"{name}-1"
    definition = {"name": name, "base": "demo", "members": {}, "contrasts": contrasts}
    store.execute(
        "INSERT INTO families (family_id, name, definition, sha256) VALUES (?, ?, ?, 'x')",
        [family_id, name, json.dumps(definition)],
    )
    for i, (member, (study_id, overrides)) in enumerate(members.items()):
        store.execute(
            "INSERT INTO family_members VALUES (?, ?, ?, ?, ?)", [family_id, member, i, study_id, json.dumps(overrides)]
        )
    return family_id
