"""`hierconsole replicate --dry-run` on a generated CUB-layout folder (its plan, jobs and calibrated estimate),
and the input hashes it keys on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hierconsole.study import read
from hierconsole.study.analysis.stage_costs import UnitCosts
from hierconsole.study.db.replications import put_stage
from hierconsole.study.db.storage import Store
from hierconsole.study.run.calibration import described, ensure_calibration
from hierconsole.study.run.input_hashes import file_sha256, folder_sha256
from hierconsole.study.run.stage_work import calibration_run, calibration_shape, dataset_size
from tests.stores.layouts import make_cub, tiny_model


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


UNITS = UnitCosts(
    command_start=0.5, worker_start=2.0, cell_update=1e-3, comparison=1e-6, image=0.1, backbone=3.0, cores=2
)


def _cli(home, *args):
    return subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), "replicate", *args],
        capture_output=True,
        text=True,
        timeout=600,  # a dry run's first calibration imports torch in a child: slow on a loaded machine
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
def test_dry_run_lists_every_stage_and_creates_no_dataset_or_study(tmp_path):
    layout = make_cub(tmp_path)
    model = tiny_model(tmp_path)
    home = tmp_path / "home"
    args = (
        "--cub", str(layout.root), "--checklist", str(tmp_path / "checklist.csv"), "--weights", "none",
        "--model", str(model), "--scale", "smoke", "--dry-run",
    )
    done = _cli(home, *args)
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
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    # Every stage has its jobs and a calibrated estimate; the extraction counts the layout's images.
    assert f"{layout.images} images" in lines["extract-cub"] and "calibrated" in lines["extract-cub"]
    assert "jobs" in lines["factorial-cub"] and "calibrated" in lines["factorial-cub"]
    assert "time left on this machine: about" in done.stdout
    assert "calibration (measured now" in done.stdout and "no dataset or study was created" in done.stdout
    with Store(home, read_only=True) as store:
        assert read.list_datasets(store) == [] and read.list_studies(store) == []
        assert store.value("SELECT count(*) FROM calibrations") == 1
    again = _cli(home, *args)  # the stored calibration is reused, not measured again
    assert again.returncode == 0, again.stderr
    assert "calibration (measured now" not in again.stdout and "calibration (measured 20" in again.stdout


@pytest.mark.slow
def test_dry_run_after_a_stage_ran_estimates_it_measured_and_scales_the_rest(tmp_path):
    layout = make_cub(tmp_path)
    model = tiny_model(tmp_path)
    home = tmp_path / "home"
    # This machine's calibration, stored under the key the dry run computes (so it is not measured again).
    sizes = {"cub": dataset_size(layout.root)}
    run = calibration_run(sizes)
    description = described(file_sha256(model), calibration_shape(run, "smoke", sizes["cub"]))
    ensure_calibration(lambda: Store(home), description, lambda: UNITS)
    rid = "tiny-dinov2-smoke-seed0"
    with Store(home) as store:  # the extraction finished under other inputs, in 40 s
        put_stage(store, rid, "extract-cub", "done", "an-older-key", {"features": "x"}, 40.0)
    args = (
        "--cub", str(layout.root), "--checklist", str(tmp_path / "checklist.csv"), "--weights", "none",
        "--model", str(model), "--scale", "smoke", "--dry-run",
    )
    kept = _cli(home, *args)
    assert kept.returncode == 0, kept.stderr
    kept_lines = {line.split()[0]: line.split() for line in kept.stdout.splitlines() if line.startswith("  ")}
    assert "measured now" not in kept.stdout and kept_lines["extract-cub"][1] == "stale"
    done = _cli(home, *args, "--redo", "extract-cub")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert "~40s measured" in lines["extract-cub"]
    # A worker's 2 s start-up, the 3 s backbone and 96 images x 0.1 s were predicted: 40 / 14.6 scales the rest.
    ratio = 40 / (UNITS.worker_start + UNITS.backbone + layout.images * UNITS.image)
    assert f"calibrated x{ratio:.2f} (1 finished)" in lines["import-cub"]
    total = float(done.stdout.split("time left on this machine: about ")[1].split("s")[0])
    assert total > 40


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
