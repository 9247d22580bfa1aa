"""Names a user gives become ids and folder names: a study, dataset or family name that climbs out of the
home (`../../../evil`), or is 3,000 characters long, is refused in one line (exit 2) before anything is
created; and `delete` never removes a folder outside the home, whatever a store's rows say."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hierconsole.cli import main
from hierconsole.datasets import FeatureSet
from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import create_study
from tests.generic_files import write_generic
from tests.reliability.conftest import TINY_RUN, cli, one_line_error, tree_digest
from tests.stores.real import registered_home
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # the CLI in subprocesses

EVIL = "../../../evil"
LONG = "a" * 3_000
RULE = "letters, digits and . _ = + -"


def _everything(root: Path) -> set[str]:
    """Every path under `root` (files and folders), to show that nothing appeared anywhere."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def deep_home(tmp_path: Path, tiny_fs: FeatureSet) -> Path:
    """A home two folders below tmp_path, so that `studies/../../../evil` would land inside tmp_path."""
    return registered_home(tmp_path / "x" / "home", tiny_fs)


def _preset_file(tmp_path: Path, name: str) -> Path:
    demo = (Path(__file__).parents[2] / "presets" / "demo.toml").read_text()
    assert '\nname = "demo"\n' in demo
    path = tmp_path / "mine.toml"
    path.write_text(demo.replace('\nname = "demo"\n', f'\nname = "{name}"\n'))
    return path


RUNS = {
    "set": (lambda tmp: [*TINY_RUN, "--set", f'study.name="{EVIL}"'], ["study.name", EVIL]),
    "run-name": (lambda tmp: [*TINY_RUN, "--name", EVIL], ["--name", EVIL]),
    "preset-file": (
        lambda tmp: ["run", str(_preset_file(tmp, EVIL)), *TINY_RUN[2:]],
        ["mine.toml", "study.name", EVIL],
    ),
    "long-set": (lambda tmp: [*TINY_RUN, "--set", f'study.name="{LONG}"'], ["study.name", "at most 100"]),
    "long-name": (lambda tmp: [*TINY_RUN, "--name", LONG], ["--name", "at most 100"]),
    "family-name": (
        lambda tmp: ["run", "nabirds-curvature-control", "--dataset", "tiny", "--dry-run", "--name", EVIL],
        ["--name", "'../../../evil'"],
    ),
    "sweep-name": (
        lambda tmp: ["sweep", "demo", "--dataset", "tiny", "--grid", "training.lr=1e-3,1e-2", "--name", EVIL],
        ["--name", "'../../../evil'"],
    ),
}


@pytest.mark.parametrize("how", RUNS)
def test_a_study_or_family_name_that_leaves_the_home_creates_nothing(tmp_path, deep_home, how):
    args, said = RUNS[how]
    argv = args(tmp_path)
    before, digest = _everything(tmp_path), tree_digest(deep_home)
    text = one_line_error(cli(deep_home, *argv, "--epochs", "1", "--seeds", "42"))
    for part in said:
        assert part in text, text
    assert RULE in text and len(text) < 1_000, text
    assert _everything(tmp_path) == before and tree_digest(deep_home) == digest
    assert not (deep_home / "studies").exists() and not list(tmp_path.parent.glob("evil*"))


@pytest.mark.parametrize(
    "name", ["../x", "/tmp/x", "a/b", pytest.param(LONG, id="3000-chars"), ".hidden", pytest.param("x\ny", id="newline")]
)
def test_an_imported_dataset_name_that_is_no_name_is_refused_before_anything(tmp_path, name):
    files = write_generic(tmp_path / "data")
    home = tmp_path / "home"
    before = _everything(tmp_path)
    text = one_line_error(cli(home, *files.import_args(name)))
    assert "--name" in text and RULE in text and len(text) < 1_000, text
    assert _everything(tmp_path) == before and not home.exists()


def test_delete_never_removes_a_folder_outside_the_home(tmp_path, tiny_fs):
    """A store whose row names a study `../../outside` (written here directly, as a damaged or crafted
    store would hold it): `delete --yes` refuses it and the outside folder stays, as does the row."""
    home = registered_home(tmp_path / "home", tiny_fs)
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "precious.txt").write_text("mine")
    crafted = "../../outside"
    with Store(home) as store:
        real = create_study(store, tiny_preset(epochs=1, seeds=(42,)), "tiny")
        store.execute(
            "INSERT INTO studies (study_id, name, dataset_id, preset, preset_sha256, phase) "
            "SELECT ?, name, dataset_id, preset, preset_sha256, phase FROM studies WHERE study_id = ?",
            [crafted, real],
        )
        # And a dataset whose folder row points outside the home (an absolute path and a climbing one).
        for dataset_id, folder in (("abs", str(outside)), ("up", "../outside")):
            store.execute(
                "INSERT INTO datasets SELECT * REPLACE (? AS dataset_id, ? AS artifact_dir) FROM datasets "
                "WHERE dataset_id = 'tiny'",
                [dataset_id, folder],
            )
    assert (home / "studies" / crafted).resolve() == outside  # what the old code removed

    text = one_line_error(cli(home, "delete", crafted, "--yes"))
    assert "outside the home" in text and crafted in text, text
    for dataset_id in ("abs", "up"):
        text = one_line_error(cli(home, "datasets", "delete", dataset_id, "--yes"))
        assert "outside the home" in text, text
    assert (outside / "keep" / "precious.txt").read_text() == "mine"
    with Store(home, read_only=True) as store:
        assert store.value("SELECT count(*) FROM studies WHERE study_id = ?", [crafted]) == 1
        assert store.value("SELECT count(*) FROM datasets WHERE dataset_id IN ('abs', 'up')") == 2

    # The real study beside it is deleted as ever (once its queued jobs are cancelled).
    assert cli(home, "cancel", real).returncode == 0
    done = cli(home, "delete", real, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (home / "studies" / real).exists()


def test_a_study_named_by_an_earlier_version_still_reads_and_deletes(tmp_path, tiny_fs):
    """Earlier versions took any non-empty study name: such a recorded study is listed and deleted as ever
    (its preset is read back as recorded), while a new one of that name is refused."""
    home = registered_home(tmp_path / "home", tiny_fs)
    old_name, old_id = "my study", "my study-20250101-000000-abcd"
    with Store(home) as store:
        real = create_study(store, tiny_preset(epochs=1, seeds=(42,)), "tiny")
        preset = json.loads(store.value("SELECT preset FROM studies WHERE study_id = ?", [real]))
        preset["study"]["name"] = old_name
        store.execute(
            "INSERT INTO studies (study_id, name, dataset_id, preset, preset_sha256, phase) "
            "SELECT ?, ?, dataset_id, ?, preset_sha256, phase FROM studies WHERE study_id = ?",
            [old_id, old_name, json.dumps(preset), real],
        )
    (home / "studies" / old_id).mkdir()
    listed = cli(home, "studies")
    assert listed.returncode == 0 and "study-20250101-000000-abcd" in listed.stdout, listed.stdout + listed.stderr
    done = cli(home, "delete", old_id, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (home / "studies" / old_id).exists()
    text = one_line_error(cli(home, *TINY_RUN, "--set", f'study.name="{old_name}"'))
    assert "study.name" in text and RULE in text


def test_a_home_whose_datasets_folder_lies_on_another_disk_still_deletes(tmp_path, tiny_fs, capsys):
    """The home's own folders may be links elsewhere (datasets on a larger disk): the outside-the-home
    guard is of the path a row names, not of where the home's folders lie."""
    home = registered_home(tmp_path / "home", tiny_fs)
    elsewhere = tmp_path / "big-disk" / "datasets"
    elsewhere.parent.mkdir()
    shutil.move(home / "datasets", elsewhere)
    (home / "datasets").symlink_to(elsewhere, target_is_directory=True)
    assert main(["--home", str(home), "datasets", "delete", "tiny", "--yes"]) == 0, capsys.readouterr()
    assert not (elsewhere / "tiny").exists()
