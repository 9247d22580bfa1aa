"""Every table of the CLI at 60, 80, 120 and 200 columns, as a user's terminal (or a pipe, at $COLUMNS)
shows it: each number of the `--json` form appears whole in the text, ids that other commands take are
whole, and nothing stands cut with an ellipsis. Run on a real family of two members with baselines."""

from __future__ import annotations

import json
import subprocess

import pytest

from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS
from tests.shown_numbers import ELLIPSIS, assert_whole, effect_words, plain, signed
from tests.stores.real import cli, family_file, member_studies, registered_home, run_family

pytestmark = pytest.mark.slow  # worker processes and CLI subprocesses

WIDTHS = (60, 80, 120, 200)

@pytest.fixture(scope="module")
def family(tmp_path_factory, tiny_fs):
    """A finished two-member family with the frozen and pca baselines, and its run's printed summary at
    80 columns."""
    folder = tmp_path_factory.mktemp("widths")
    home = registered_home(folder / "home", tiny_fs)
    values = {
        "training.epochs": 2,
        "training.seeds": [42, 2024, 3407],
        "compute.max_parallel_jobs": 2,
        "evaluation.baselines": ["frozen", "pca"],
    }
    members = {"flat": {"geometry.poincare.c": 0.5}, "curved": {"geometry.poincare.c": 2.0}}
    contrasts = [{"name": "curved - flat", "a": "curved", "b": "flat"}]
    run = run_family(home, family_file(folder / "widths.toml", "widths", members, contrasts, values), columns=80)
    return home, member_studies(home), run.stdout


def _ok(done: subprocess.CompletedProcess, columns: int | None = None) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    if columns is not None:  # the text form stays within the terminal: nothing runs off its edge
        assert max(len(line) for line in done.stdout.splitlines()) <= columns
    return done.stdout


@pytest.mark.parametrize("sesoi", [(), ("--sesoi", "0.005")], ids=["", "sesoi"])
@pytest.mark.parametrize("columns", WIDTHS)
def test_effects_shows_every_number_of_its_json_whole(family, columns, sesoi):
    home, members, _ = family
    study = members["curved"]
    doc = json.loads(_ok(cli(home, "effects", study, "--metric", "hier_mAP", *sesoi, "--json")))
    text = _ok(cli(home, "effects", study, "--metric", "hier_mAP", *sesoi, columns=columns), columns)
    words = [plain(r["mean"], ARM_DIGITS) for r in doc["arms"]]
    words += [plain(r["sd"], ARM_DIGITS) for r in doc["arms"] if r["sd"] is not None]
    for section in ("effects", "baseline_contrasts"):
        for by_name in doc[section].values():
            for row in by_name.values():
                words += effect_words(row, EFFECT_DIGITS)
    assert doc["baseline_contrasts"], "the family members were scored against baselines"
    assert_whole(text, words, f"effects at {columns} columns")


@pytest.mark.parametrize("sesoi", [(), ("--sesoi", "0.005")], ids=["", "sesoi"])
@pytest.mark.parametrize("columns", WIDTHS)
def test_a_family_contrast_shows_every_number_of_its_json_whole(family, columns, sesoi):
    home, _, _ = family
    doc = json.loads(_ok(cli(home, "contrast", "widths", *sesoi, "--json")))
    text = _ok(cli(home, "contrast", "widths", *sesoi, columns=columns), columns)
    rows = [row for c in doc["contrasts"] for row in c["rows"]]
    assert {row["family"] for row in rows} == {"family widths"} and all(row["p_holm"] is not None for row in rows)
    assert all((row["verdict"] is not None) == bool(sesoi) for row in rows)
    words = [w for c in doc["contrasts"] for row in c["rows"] for w in effect_words(row, EFFECT_DIGITS)]
    assert_whole(text, words, f"contrast at {columns} columns")


@pytest.mark.parametrize("columns", WIDTHS)
def test_families_studies_and_runs_keep_every_id_and_count_whole(family, columns):
    home, members, _ = family
    families = _ok(cli(home, "families", columns=columns), columns)
    assert_whole(families, [*members, *members.values(), "2/2"], f"families at {columns} columns")
    studies = _ok(cli(home, "studies", columns=columns), columns)
    assert_whole(studies, [*members.values(), "tiny", "complete"], f"studies at {columns} columns")
    runs = _ok(cli(home, "runs", columns=columns), columns)
    assert_whole(runs, ["finished", "2/2"], f"runs at {columns} columns")
    audit = _ok(cli(home, "audit", members["flat"], columns=columns), columns)
    assert_whole(audit, ["trainable_parameters", "update_budget", "pass"], f"audit at {columns} columns")


def test_the_family_run_summary_at_80_columns_cuts_no_contrast(family):
    home, _, summary = family
    doc = json.loads(_ok(cli(home, "contrast", "widths", "--json")))
    words = [signed(row["mean"], EFFECT_DIGITS) for c in doc["contrasts"] for row in c["rows"]]
    assert_whole(summary, words, "the family run's summary")


@pytest.mark.parametrize("columns", (60, 80))
def test_export_to_standard_output_cuts_nothing(family, columns):
    home, members, _ = family
    text = _ok(cli(home, "export", "effects", "--study", members["flat"], "--format", "md", "-o", "-", columns=columns))
    assert ELLIPSIS not in text and "geom_S" in text


@pytest.mark.parametrize("columns", WIDTHS)
def test_a_jobs_error_reads_as_a_sentence_at_any_width(fixed_home, columns):
    """As the probe met it: at 80 columns the runs table wrapped a crashed job's error one word per line."""
    from tests.stores.fixed import LIVE

    text = _ok(cli(fixed_home, "runs", LIVE, columns=columns), columns)
    error = "worker PID 4242 is gone (orchestrator restarted); resume it with `hierconsole resume`"
    assert error in " ".join(text.split())
    lines = [line for line in text.splitlines() if any(w in line for w in ("4242", "restarted", "resume`"))]
    assert len(lines) <= max(2, len(error) // (columns // 2)), text
