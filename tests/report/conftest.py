"""A store for the figure and report tests: the fixed complete study (tests/tui/fixtures.py), a copy of it
that tuned its temperatures, and a family of four complete members at different (c, r) operating points.

The members' evidence goes through the real ingest and phase logic as the fixed study's does; each member
shifts every metric by its own amount, so the contrasts between members are known. Only the tuning rows
are written directly: they are the lifecycle's selection record, which no worker event carries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hierconsole.datasets import FeatureSet
from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import advance, create_study
from tests.tui.fixtures import (
    EPOCHS,
    SEEDS,
    _apply,
    _set_job,
    build_store,
    evaluation_events,
    training_events,
)

FAMILY = "gridfam"
MEMBERS = {  # member -> (c, r, shift of every metric)
    "near-flat": (1e-6, 0.4, -0.004),
    "base": (0.5, 0.4, 0.0),
    "strong": (2.0, 0.4, -0.010),
    "small-radius": (0.5, 0.2, 0.003),
}
CONTRASTS = [
    {"name": "Base - Near-flat", "a": "base", "b": "near-flat", "arms": None},
    {"name": "Strong - Base", "a": "strong", "b": "base", "arms": "H_R:H_R"},
]
TUNED = "demo-tuned"


def _shifted(events: list, shift: float) -> list:
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
    from tests.tui.conftest import tiny_preset

    mp.setattr("hierconsole.study.run.lifecycle.new_study_id", lambda preset: study_id)
    pinned = {
        "evaluation.qg_seeds": list(SEEDS),
        "evaluation.aggregation": "micro",
        "temperature.euclidean": 0.2,
        "temperature.poincare": 0.2,
        "training.drop_last": True,
        "compute.max_parallel_jobs": 2,
        **values,
    }
    sid = create_study(store, tiny_preset(epochs=EPOCHS, seeds=SEEDS, **pinned), "tiny")
    for seed in SEEDS:
        job = f"{sid}/final-s{seed}"
        _apply(store, job, sid, "final", seed, training_events(seed, EPOCHS))
        _set_job(store, job, "finished")
    assert advance(store, sid) == "evaluating"
    _apply(store, f"{sid}/evaluate", sid, "evaluate", 0, _shifted(evaluation_events(sid), shift))
    _set_job(store, f"{sid}/evaluate", "finished")
    assert advance(store, sid) == "complete"
    return sid


@pytest.fixture(scope="session")
def report_home(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> Path:
    """Read-only for tests: the fixed store plus a tuned study and the family `gridfam`."""
    home = tmp_path_factory.mktemp("report") / "home"
    build_store(home, tiny_fs)
    with Store(home) as store, pytest.MonkeyPatch.context() as mp:
        tuned = complete_study(store, TUNED, mp, {"study.name": "demo-tuned"})
        for geometry, scores in (("euclidean", (0.30, 0.34, 0.33)), ("poincare", (0.31, 0.32, 0.35))):
            best = max(scores)
            for tau, score in zip((0.05, 0.1, 0.2), scores, strict=True):
                store.execute(
                    "INSERT INTO tuning VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [tuned, geometry, tau, score - 0.01, score + 0.01, score, "winner" if score == best else None],
                )
        definition = {"name": FAMILY, "base": "demo", "members": {}, "contrasts": CONTRASTS}
        store.execute(
            "INSERT INTO families (family_id, name, definition, sha256) VALUES (?, ?, ?, 'x')",
            [f"{FAMILY}-1", FAMILY, json.dumps(definition)],
        )
        for i, (member, (c, r, shift)) in enumerate(MEMBERS.items()):
            overrides = {"geometry.poincare.c": c, "geometry.poincare.r": r}
            sid = complete_study(store, f"{FAMILY}-{member}", mp, {**overrides, "study.name": f"{FAMILY}.{member}"}, shift)
            store.execute(
                "INSERT INTO family_members VALUES (?, ?, ?, ?, ?)", [f"{FAMILY}-1", member, i, sid, json.dumps(overrides)]
            )
    return home


@pytest.fixture
def report_store(report_home: Path):
    with Store(report_home) as store:
        yield store
