"""`hierconsole replicate --dry-run` on a generated CUB-layout folder, and the input hashes it keys on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hierconsole.study.run.input_hashes import folder_sha256


def _cub(root):
    images = root / "images" / "001.Black_footed_Albatross"
    images.mkdir(parents=True)
    for i in range(3):
        (images / f"img_{i}.jpg").write_bytes(bytes([i]) * 64)
    (root / "classes.txt").write_text("1 001.Black_footed_Albatross\n")
    (root / "image_class_labels.txt").write_text("1 1\n2 1\n3 1\n")
    (root / "images.txt").write_text("".join(f"{i + 1} 001.Black_footed_Albatross/img_{i}.jpg\n" for i in range(3)))
    (root.parent / "taxonomy.csv").write_text("leaf,middle,high\n001.Black_footed_Albatross,Phoebastria,Diomedeidae\n")
    return root


def _cli(home, *args):
    return subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), "replicate", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_folder_hash_sees_a_changed_added_or_renamed_image_only(tmp_path):
    cub = _cub(tmp_path / "CUB_200_2011")
    first = folder_sha256(cub / "images")
    assert folder_sha256(cub / "images") == first
    image = cub / "images" / "001.Black_footed_Albatross" / "img_0.jpg"
    image.write_bytes(b"changed")
    changed = folder_sha256(cub / "images")
    assert changed != first
    image.rename(image.with_name("img_9.jpg"))
    assert folder_sha256(cub / "images") not in (first, changed)


@pytest.mark.slow
def test_dry_run_lists_every_stage_and_creates_nothing(tmp_path):
    cub = _cub(tmp_path / "CUB_200_2011")
    home = tmp_path / "home"
    done = _cli(
        home, "--cub", str(cub), "--cub-taxonomy", str(tmp_path / "taxonomy.csv"), "--weights", "none",
        "--scale", "smoke", "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    for stage in (
        "extract-cub",
        "taxonomy-cub",
        "import-cub",
        "factorial-cub",
        "families-cub",
        "baselines-cub",
        "rescore-cub",
        "tables",
        "report",
    ):
        assert stage in done.stdout
    assert "extract-nabirds" not in done.stdout and "omitted: the tables of nabirds" in done.stdout
    assert not home.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--weights", "none", "--dry-run"], "give --cub DIR"),
        (["--cub", "{tmp}/nowhere", "--weights", "none", "--dry-run"], "no images/ folder"),
        (["--cub", "{cub}", "--cub-taxonomy", "{tmp}/taxonomy.csv", "--weights", "{tmp}/w.pt"], "--weights"),
        (["--cub", "{cub}", "--weights", "none"], "needs CUB's taxonomy"),
        (["--cub", "{cub}", "--cub-taxonomy", "{tmp}/nope.csv", "--weights", "none"], "--cub-taxonomy"),
        (["--cub", "{cub}", "--cub-taxonomy", "{tmp}/taxonomy.csv", "--weights", "none", "--model", "vitz9"], "--model"),
        (["--cub", "{cub}", "--cub-taxonomy", "{tmp}/taxonomy.csv", "--weights", "none", "--redo", "nope"], "--redo nope"),
        (["--nabirds", "{cub}", "--weights", "none", "--checklist", "{tmp}/taxonomy.csv"], "CUB's"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, said):
    cub = _cub(tmp_path / "CUB_200_2011")
    home = tmp_path / "home"
    done = _cli(home, *(a.format(tmp=tmp_path, cub=cub) for a in args))
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    assert not home.exists()
