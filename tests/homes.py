"""Really trained tiny homes, each built once per test session (tests/conftest.py's `trained_*` fixtures):
a plain study, a study with the three baselines, and a family of two members.

A module that reads a trained study copies one (`copy_home`) instead of training its own: homes are
relocatable, so a copy is the same real, trained home, bit for bit. Never write to the session's home
itself: other modules copy it after you.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hierconsole.cli import main
from hierconsole.datasets import FeatureSet
from hierconsole.study.db.storage import Store
from tests.stores.real import registered_home, run_family
from tests.tiny import TINY_VALUES

EPOCHS = 2
SEEDS = (42, 2024)
# The demo preset on the tiny data (tests/tiny.py's values, as tiny_preset() makes it): EPOCHS, SEEDS, the four
# cells, no baselines.
PLAIN = TINY_VALUES
# The same with every baseline arm, as tests/reliability's TINY_RUN trains it.
BASELINES = {**TINY_VALUES, "evaluation.baselines": ["frozen", "pca", "hier"]}

FAMILY = "tinyfam"
FAMILY_TOML = """\
[family]
name = "tinyfam"
description = "two members differing in the Poincare curvature"
base = "demo"

[overrides]
{overrides}

[members.flat]
"geometry.poincare.c" = 0.5

[members.curved]
geometry.poincare.c = 2.0

[[contrasts]]
name = "curved - flat"
a = "curved"
b = "flat"

[[contrasts]]
name = "curved H_S - flat E_S"
a = "curved"
b = "flat"
arms = "H_S:E_S"
"""


@dataclass(frozen=True)
class TrainedStudy:
    home: Path
    study_id: str


@dataclass(frozen=True)
class TrainedFamily:
    home: Path
    stdout: str
    """What `hierconsole run FAMILY.toml` printed (at the terminal width of a pipe)."""


def family_file(folder: Path) -> Path:
    """The family FAMILY, written by hand: it spells a member's key both quoted and as dotted TOML keys."""
    values = {
        **TINY_VALUES,
        "training.epochs": EPOCHS,
        "training.seeds": list(SEEDS),
        "compute.max_parallel_jobs": 2,
    }
    lines = "\n".join(f'"{k}" = {json.dumps(v)}' for k, v in values.items())
    path = folder / f"{FAMILY}.toml"
    path.write_text(FAMILY_TOML.format(overrides=lines))
    return path


def train_study(home: Path, tiny_fs: FeatureSet, values: Mapping[str, Any]) -> TrainedStudy:
    """A new home with the demo preset and `values` on the tiny data, EPOCHS and SEEDS, as `hierconsole run`
    trains it (the CLI's entry in-process; its workers are real processes)."""
    registered_home(home, tiny_fs)
    sets = [arg for k, v in values.items() for arg in ("--set", f"{k}={json.dumps(v)}")]
    seeds = ",".join(map(str, SEEDS))
    code = main(["--home", str(home), "run", "demo", "--epochs", str(EPOCHS), "--seeds", seeds, *sets])
    assert code == 0, f"the shared home's run failed ({code})"
    with Store(home, read_only=True) as store:
        return TrainedStudy(home, store.value("SELECT study_id FROM studies"))


def train_family(folder: Path, tiny_fs: FeatureSet) -> TrainedFamily:
    """A new home (`folder`/home) with FAMILY run to the end by the CLI."""
    home = registered_home(folder / "home", tiny_fs)
    return TrainedFamily(home, run_family(home, family_file(folder)).stdout)


def copy_home(home: Path, to: Path) -> Path:
    """A copy of `home` at `to` (a new folder): the same trained home, to change as a test likes."""
    shutil.copytree(home, to, symlinks=True)
    return to
