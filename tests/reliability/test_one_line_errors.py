"""Inputs a fault probe met with a traceback, each now one `error:` line (exit 2) that changes nothing: a
file name that is not UTF-8, an integer option past what the store keeps, a preset of random bytes, and a
confirmation asked of a process with no terminal."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hierconsole.study.db.storage import Store
from tests.generic_files import write_generic
from tests.reliability.conftest import TINY_RUN, cli, one_line_error, tree_digest

pytestmark = pytest.mark.slow  # the CLI in subprocesses

NOT_UTF8 = b"\xff"
"""A byte no UTF-8 text holds: a file named with it is a real file whose name Python sees as a surrogate."""


def _undecodable(path: Path) -> str:
    """`path` renamed to carry an invalid UTF-8 byte before its suffix; the name as argv gives it to Python."""
    target = os.fsencode(path.with_name(path.stem)) + NOT_UTF8 + os.fsencode(path.suffix)
    os.rename(path, target)
    return os.fsdecode(target)


@pytest.mark.parametrize("command", ["generic", "cub", "extract", "run", "export"])
def test_a_file_name_that_is_not_utf8_is_one_line(tmp_path, tiny_home, command):
    files = write_generic(tmp_path / "files")
    features = _undecodable(files.features)
    folder = tmp_path / "images"
    folder.mkdir()
    bad_folder = _undecodable(folder)
    preset = tmp_path / "preset.toml"
    preset.write_text('[study]\nname = "x"\n')
    args = {
        "generic": ["import", "generic", features, str(files.labels), str(files.taxonomy), "--name", "x"],
        "cub": ["import", "cub", bad_folder, features, str(files.taxonomy), "--name", "x"],
        "extract": ["extract", "folder", bad_folder, "-o", str(tmp_path / "out.npz"), "--weights", "none"],
        "run": ["run", _undecodable(preset), "--dry-run"],
        "export": ["export", "studies", "-o", os.fsdecode(os.fsencode(tmp_path / "out") + NOT_UTF8 + b".csv")],
    }[command]
    before = tree_digest(tiny_home)
    text = one_line_error(cli(tiny_home, *args))
    assert "not valid UTF-8" in text and "\\xff" in text and "rename" in text, text
    assert tree_digest(tiny_home) == before


@pytest.mark.parametrize(
    "flags",
    [
        ["--epochs", "3000000000"],
        ["--set", "training.epochs=3000000000"],
        ["--set", "evaluation.n_query=99999999999999999999"],
        ["--set", "training.batch_size=3000000000"],
        ["--parallel", "3000000000"],
        ["--set", "training.lr=" + "1" * 400],  # a whole number no float holds, for a float option
    ],
    ids=["epochs", "set-epochs", "set-n-query", "set-batch", "parallel", "set-lr-past-float"],
)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_an_integer_past_the_store_is_refused_before_anything_is_created(tiny_home, flags, dry_run):
    before = tree_digest(tiny_home)
    extra = ["--dry-run"] if dry_run else []
    text = one_line_error(cli(tiny_home, *TINY_RUN, "--seeds", "42", *flags, *extra))
    assert ("(finite)" if "training.lr" in flags[-1] else "2,147,483,647") in text, text
    assert tree_digest(tiny_home) == before and not (tiny_home / "studies").exists()


def _family(path: Path) -> Path:
    path.write_bytes(b'[family]\nname = "f"\nbase = "demo"\n\n[overrides]\n"study.name" = "\xff\xfe"\n')
    return path


@pytest.mark.parametrize("case", ["random", "family", "nested-set", "nested-file"])
def test_a_preset_of_random_bytes_is_one_line(tmp_path, tiny_home, case):
    garbage = tmp_path / "garbage.toml"
    garbage.write_bytes(np.random.default_rng(6).integers(0, 256, size=300, dtype=np.uint8).tobytes())
    nested = tmp_path / "nested.toml"
    nested.write_text("[study]\nname = " + "[" * 5000 + "]" * 5000 + "\n")
    args = {
        "random": ["run", str(garbage)],
        "family": ["run", str(_family(tmp_path / "family.toml"))],
        "nested-set": [*TINY_RUN, "--set", "training.epochs=" + "[" * 5000 + "]" * 5000],
        "nested-file": ["run", str(nested)],
    }[case]
    before = tree_digest(tiny_home)
    text = one_line_error(cli(tiny_home, *args))
    if case in ("random", "family"):
        assert "not UTF-8" in text, text
    assert tree_digest(tiny_home) == before


@pytest.mark.parametrize("what", ["study", "dataset"])
def test_delete_with_no_terminal_asks_for_yes(fixed_copy, what):
    with Store(fixed_copy, read_only=True) as store:
        study = store.value("SELECT min(study_id) FROM studies")
        dataset = store.value("SELECT min(dataset_id) FROM datasets")
    args = ["delete", study] if what == "study" else ["datasets", "delete", dataset]
    before = tree_digest(fixed_copy)
    done = cli(fixed_copy, *args, stdin=subprocess.DEVNULL)
    text = one_line_error(done)
    assert "no terminal to confirm" in text and "--yes" in text, text
    assert tree_digest(fixed_copy) == before


def test_delete_takes_an_answer_piped_in(fixed_copy):
    """A script that pipes its answer (`yes | hierconsole delete ...`) is answered as a person typing is."""
    with Store(fixed_copy, read_only=True) as store:
        study = store.rows("SELECT study_id FROM studies ORDER BY study_id")[0][0]
    done = cli(fixed_copy, "delete", study, input="n\n")
    assert done.returncode == 1 and "kept" in done.stdout and "error" not in done.stderr, done.stdout + done.stderr
    with Store(fixed_copy, read_only=True) as store:
        assert study in {r[0] for r in store.rows("SELECT study_id FROM studies")}
    done = cli(fixed_copy, "delete", study, input="y\n")
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(fixed_copy, read_only=True) as store:
        assert study not in {r[0] for r in store.rows("SELECT study_id FROM studies")}
