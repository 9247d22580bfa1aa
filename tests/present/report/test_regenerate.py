"""The report's "Regenerate" command regenerates: run as printed, against the same home, it makes a study
whose runs and metrics equal the reported study's. For a study on an imported dataset it once left out
`--dataset`, and so trained on the demo's synthetic data instead."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN, cli
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # studies in subprocesses

RUN = [*TINY_RUN, "--epochs", "2", "--seeds", "42"]


def _studies(home: Path) -> list[str]:
    with Store(home, read_only=True) as store:
        return [r[0] for r in store.rows("SELECT study_id FROM studies ORDER BY created_at")]


def _results(home: Path, study: str) -> tuple[list[tuple], list[tuple], str]:
    """A study's weights hashes, test metrics and dataset: equal iff it was trained and scored alike."""
    with Store(home, read_only=True) as store:
        models = store.rows("SELECT seed, arm, final_sha256 FROM runs WHERE study_id = ? AND kind = 'final' ORDER BY ALL", [study])
        metrics = store.rows(
            "SELECT seed, arm, perturbation, level, metric, value FROM metrics WHERE study_id = ? AND NOT posthoc "
            "ORDER BY ALL",
            [study],
        )
        dataset = store.value("SELECT dataset_id FROM studies WHERE study_id = ?", [study])
    return models, metrics, dataset


def test_the_printed_run_command_regenerates_a_study_on_an_imported_dataset(tiny_fs, tmp_path):
    tiny_home = registered_home(tmp_path / "home", tiny_fs)
    done = cli(tiny_home, *RUN)
    assert done.returncode == 0, done.stdout + done.stderr
    (study,) = _studies(tiny_home)
    report = tmp_path / "report.md"
    made = cli(tiny_home, "report", study, "-o", str(report))
    assert made.returncode == 0, made.stdout + made.stderr
    (command,) = [line for line in report.read_text().splitlines() if re.match(r"hierconsole run ", line)]

    again = cli(tiny_home, *shlex.split(command)[1:])
    assert again.returncode == 0, command + "\n" + again.stdout + again.stderr
    (_, regenerated) = _studies(tiny_home)
    original = _results(tiny_home, study)
    assert original[2] == "tiny" and original[0] and original[1]
    assert _results(tiny_home, regenerated) == original, command
