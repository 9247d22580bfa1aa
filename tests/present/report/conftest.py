"""A store for the figure and report tests: the fixed complete study (tests/stores/fixed.py), a copy of it
that tuned its temperatures, and a family of four complete members at different (c, r) operating points.

The members' evidence goes through the real ingest and phase logic as the fixed study's does; each member
shifts every metric by its own amount, so the contrasts between members are known. Only the tuning rows
are written directly: they are the lifecycle's selection record, which no worker event carries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hierconsole.datasets import FeatureSet
from hierconsole.study.db.storage import Store
from tests.stores.fixed import add_family, add_tuning, build_store, complete_study

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
                add_tuning(store, tuned, geometry, tau, {"middle": score - 0.01, "high": score + 0.01}, score, "winner" if score == best else None)
        members = {}
        for member, (c, r, shift) in MEMBERS.items():
            overrides = {"geometry.poincare.c": c, "geometry.poincare.r": r}
            values = {**overrides, "study.name": f"{FAMILY}.{member}"}
            members[member] = (complete_study(store, f"{FAMILY}-{member}", mp, values, shift), overrides)
        add_family(store, FAMILY, members, CONTRASTS)
    return home


@pytest.fixture
def report_store(report_home: Path):
    with Store(report_home) as store:
        yield store
