"""The shipped presets and families on a user's own data (a generic train/test import): counts that do not
fit are refused before anything is created, one line each with the override that fits; the split plan says
what is carved out of what; and the README's recipe runs as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.generic_files import GenericFiles, write_generic
from tests.reliability.conftest import one_line_error, tree_digest
from tests.stores.real import cli

pytestmark = pytest.mark.slow  # the CLI in subprocesses

WIDE = 250
"""Terminal width for the tests that read a table's rows whole."""
FAMILY = "nabirds-semantic-control"
# What the generated dataset (24 leaves, 12 middles, 3 highs; 8 train + 5 test images a leaf) needs: each
# refusal below leaves one of these out and must name it alone.
FITS = {
    "split.fractions": "[0.6,0.2,0.2]",
    "split.leaf_counts": "none",
    "split.image_counts": "none",
    "expected": "none",
    "evaluation.n_query": "4",
    "temperature.tuning.n_query": "none",
    "training.batch_size": "64",
}
REFUSED = {
    "split.fractions": "split.counts = [242, 81, 81] adds up to 404 middle groups, but dataset 'mine' has 12",
    "split.leaf_counts": "split.leaf_counts = [328, 114, 113] adds up to 555 leaves, but dataset 'mine' has 24",
    "split.image_counts": "split.image_counts = [13959, 5062, 5017]: dataset 'mine' has 192 official train/val "
    "and 120 official test images",
    "expected": "expected.leaves = 555, expected.middle_groups = 404, expected.high_groups = 22: dataset 'mine' "
    "has 24 leaves, 12 middle groups, 3 high groups",
    # 2 of 12 middle groups of 2 leaves with 5 test images each; the proposal is 20% of them.
    "evaluation.n_query": "evaluation.n_query = 1003: the test split of dataset 'mine' holds only 20 images",
    "temperature.tuning.n_query": "temperature.tuning.n_query = 1013: the validation part of dataset 'mine' "
    "holds only 48 images",
    # Epoch selection fits the train part only: 7 of 12 groups, 14 leaves x 8 train images.
    "training.batch_size": "training.batch_size = 128: the smallest training set of dataset 'mine' holds 112 images",
}


def _sets(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> GenericFiles:
    return write_generic(tmp_path_factory.mktemp("mine"))


@pytest.fixture
def home(tmp_path, data) -> Path:
    home = tmp_path / "home"
    done = cli(home, *data.import_args("mine"), columns=WIDE)
    assert done.returncode == 0, done.stderr
    # A train/test import is told at once that validation will come out of train.
    assert "no val split: a study on mine validates on a leaf-stratified 20% hold-out of train" in done.stdout
    return home


@pytest.mark.parametrize("left_out", REFUSED)
def test_each_count_that_does_not_fit_is_refused_alone_and_creates_nothing(home, left_out):
    before = tree_digest(home)
    values = {k: v for k, v in FITS.items() if k != left_out}
    text = one_line_error(cli(home, "run", FAMILY, "--dataset", "mine", "--epochs", "1", *_sets(values)))
    assert REFUSED[left_out] in text
    quoted = shlex.quote(f"{left_out}={FITS[left_out]}")
    assert text.endswith(f": --set {quoted}"), text
    assert tree_digest(home) == before and not (home / "studies").exists()


def test_a_pca_baseline_wider_than_the_features_is_refused(home):
    before = tree_digest(home)
    text = one_line_error(
        cli(home, "run", "demo", "--dataset", "mine", "--set", "training.out_dim=64", "--set", "evaluation.n_query=30")
    )
    assert "the pca baseline projects to training.out_dim = 64 axes, but dataset 'mine' has 48-D features" in text
    assert text.endswith("""--set 'evaluation.baselines=["frozen"]'""")
    assert tree_digest(home) == before and not (home / "studies").exists()


def test_one_refusal_names_every_override_and_they_fit(home):
    done = cli(home, "run", FAMILY, "--dataset", "mine", "--dry-run")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(FITS) + 1  # one per option, then all of them
    last = lines[-1]
    assert last.startswith("all of them: ")
    overrides = shlex.split(last.removeprefix("all of them: "))
    assert dict(a.split("=", 1) for a in overrides[1::2]) == FITS
    before = tree_digest(home)
    fits = cli(home, "run", FAMILY, "--dataset", "mine", "--dry-run", *overrides, columns=WIDE)
    assert fits.returncode == 0, fits.stderr
    assert "nothing was created (dry run)" in fits.stdout
    # The four members share one split: one plan, naming them all.
    assert fits.stdout.count("split plan: ") == 1
    assert "split plan: leaf-only, leaf-parent, full, shuffled (dataset mine)" in fits.stdout
    assert tree_digest(home) == before and not (home / "studies").exists()


def _row(stdout: str, name: str) -> list[str]:
    line = next(line for line in stdout.splitlines() if re.match(rf"[│ ]*{name} +[│ ]*\d", line))
    return [cell.strip() for cell in re.split(r"│| {2,}", line) if cell.strip()]


def test_the_plan_says_validation_is_carved_from_a_train_test_import(home):
    done = cli(home, "run", "demo", "--dataset", "mine", "--dry-run", "--set", "evaluation.n_query=30", columns=WIDE)
    assert done.returncode == 0, done.stderr
    # 24 leaves x 8 train images, round(0.2 * 8) = 2 of each leaf held out: 48 of 192.
    assert "validation is carved from train, a leaf-stratified 20% hold-out (48 images of 192)" in done.stdout
    assert "fixed-endpoint final runs still fit all of train, hold-out included" in done.stdout
    assert _row(done.stdout, "train")[1] == "192"
    assert _row(done.stdout, "test")[1] == "120"
    assert _row(done.stdout, "development")[1] == "192"
    assert _row(done.stdout, "validation fit")[1] == "144"
    query, gallery = int(_row(done.stdout, "validation query")[1]), int(_row(done.stdout, "validation gallery")[1])
    assert query == round(0.2 * 48) and query + gallery == 48
    assert _row(done.stdout, "test query")[1] == "30" and _row(done.stdout, "test gallery")[1] == "90"
    assert not (home / "studies").exists()


def _readme_commands() -> list[list[str]]:
    text = (Path(__file__).parents[2] / "README.md").read_text()
    section = text.split("## Your own data", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def test_the_readme_recipe_runs_a_family_on_a_generic_dataset(tmp_path, data):
    commands = _readme_commands()
    assert [c[:2] for c in commands] == [["hierconsole", "import"], *[["hierconsole", "run"]] * 3]
    home = tmp_path / "home"
    names = {"features.npz": data.features, "labels.csv": data.labels, "taxonomy.csv": data.taxonomy}
    results = [cli(home, *(str(names.get(arg, arg)) for arg in command[1:]), timeout=600) for command in commands]
    imported, refused, planned, ran = results
    assert imported.returncode == 0, imported.stderr
    assert refused.returncode == 2
    # The refusal's overrides are the ones the README's next commands give.
    last = refused.stderr.strip().splitlines()[-1]
    assert shlex.split(last.removeprefix("all of them: ")) == commands[2][commands[2].index("--set") :]
    assert planned.returncode == 0 and "nothing was created" in planned.stdout, planned.stderr
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    assert "split plan: leaf-only, leaf-parent, full, shuffled" in ran.stdout
    assert "4/4 complete" in ran.stdout
