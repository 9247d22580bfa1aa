"""`hierconsole replicate --dry-run` on a generated CUB-layout folder (its plan, jobs and calibrated estimate),
and the input hashes it keys on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hierconsole.study import read
from hierconsole.study.db.replications import put_stage
from hierconsole.study.db.storage import Store
from hierconsole.study.replication.calibration import described, ensure_calibration
from hierconsole.study.replication.costs import UnitCosts
from hierconsole.study.replication.hashes import file_sha256, folder_sha256
from hierconsole.study.replication.work import calibration_run, calibration_shape, dataset_size
from tests.stores.layouts import make_cub, make_nabirds, tiny_model


def _cub(root):
    images = root / "images" / "001.Black_footed_Albatross"
    images.mkdir(parents=True)
    for i in range(3):
        (images / f"img_{i}.jpg").write_bytes(bytes([i]) * 64)
    (root / "classes.txt").write_text("1 001.Black_footed_Albatross\n")
    (root / "image_class_labels.txt").write_text("1 1\n2 1\n3 1\n")
    (root / "train_test_split.txt").write_text("1 1\n2 1\n3 0\n")
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
    assert "in this process" in lines["tables"] and "in this process" in lines["report"]  # said "1 command"
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


def _nabirds(tmp):
    return make_nabirds(tmp / "nab", supergroups=2, parents=2, leaves=2, per_class=1).root


def _not_utf8(path):
    path.write_bytes(b"1 caf\xe9/img.jpg\n")


# Each case: (arrange the inputs in tmp, the options, what the one line must say: the option or file, what
# is wrong, the fix). Every valid input beside the bad one is a real one, so only the bad one is refused.
_TAXONOMY = ["--cub-taxonomy", "{tmp}/taxonomy.csv", "--weights", "none"]
_REFUSED = {
    "out-is-a-file": (
        lambda tmp, cub: (tmp / "tables.md").write_text("x"),
        ["--cub", "{cub}", *_TAXONOMY, "--out", "{tmp}/tables.md"],
        ["--out", "tables.md", "is a file, not a folder", "give a folder"],
    ),
    "out-under-a-file": (
        lambda tmp, cub: (tmp / "tables.md").write_text("x"),
        ["--cub", "{cub}", *_TAXONOMY, "--out", "{tmp}/tables.md/tables"],
        ["--out", "tables.md is a file", "give a folder"],
    ),
    "cub-images-not-utf8": (
        lambda tmp, cub: _not_utf8(cub / "images.txt"),
        ["--cub", "{cub}", *_TAXONOMY],
        ["--cub", "images.txt: the list is not UTF-8 text (line 1", "fix:"],
    ),
    "nabirds-images-not-utf8": (
        lambda tmp, cub: _not_utf8(_nabirds(tmp) / "images.txt"),
        ["--nabirds", "{tmp}/nab/nabirds", "--weights", "none"],
        ["--nabirds", "images.txt: the list is not UTF-8 text (line 1", "fix:"],
    ),
    "nabirds-hierarchy-not-utf8": (
        lambda tmp, cub: (_nabirds(tmp) / "hierarchy.txt").write_bytes(b"1 \xff\n"),
        ["--nabirds", "{tmp}/nab/nabirds", "--weights", "none"],
        ["--nabirds", "hierarchy.txt: the list is not UTF-8 text (line 1", "fix:"],
    ),
    "cub-lists-no-images": (
        lambda tmp, cub: (cub / "images.txt").write_text(""),
        ["--cub", "{cub}", *_TAXONOMY],
        ["--cub", "images.txt: no images listed", "fix:"],
    ),
    "nabirds-lists-no-images": (
        lambda tmp, cub: (_nabirds(tmp) / "images.txt").write_text("\n"),
        ["--nabirds", "{tmp}/nab/nabirds", "--weights", "none"],
        ["--nabirds", "images.txt: no images listed", "fix:"],
    ),
    "cub-without-classes": (
        lambda tmp, cub: (cub / "classes.txt").unlink(),
        ["--cub", "{cub}", *_TAXONOMY],
        ["--cub", "classes.txt: missing", "fix:"],
    ),
    "cub-without-split": (
        lambda tmp, cub: (cub / "train_test_split.txt").unlink(),
        ["--cub", "{cub}", *_TAXONOMY],
        ["--cub", "train_test_split.txt: missing", "fix:"],
    ),
    "nabirds-given-as-cub": (
        lambda tmp, cub: _nabirds(tmp),
        ["--cub", "{tmp}/nab/nabirds", *_TAXONOMY],
        ["--cub", "hierarchy.txt", "NABirds folder", "pass it as --nabirds"],
    ),
    "cub-taxonomy-without-a-class": (
        lambda tmp, cub: (tmp / "taxonomy.csv").write_text("leaf,middle,high\nSomething_Else,G,F\n"),
        ["--cub", "{cub}", *_TAXONOMY],
        ["--cub-taxonomy", "taxonomy.csv", "has no row", "fix:"],
    ),
    "model-malformed-json": (
        lambda tmp, cub: (tmp / "m.json").write_text("{not json"),
        ["--cub", "{cub}", *_TAXONOMY, "--model", "{tmp}/m.json"],
        ["--model", "m.json", "not valid JSON"],
    ),
    "model-not-dinov2": (
        lambda tmp, cub: (tmp / "m.json").write_text('{"model_type": "vit", "hidden_size": 32}'),
        ["--cub", "{cub}", *_TAXONOMY, "--model", "{tmp}/m.json"],
        ["--model", "m.json", "only DINOv2 models", "no 'num_hidden_layers'", "fix: give a DINOv2 config"],
    ),
    "model-json-list": (
        lambda tmp, cub: (tmp / "m.json").write_text("[1, 2]"),
        ["--cub", "{cub}", *_TAXONOMY, "--model", "{tmp}/m.json"],
        ["--model", "m.json", "must be a JSON object"],
    ),
    "checklist-not-utf8": (
        lambda tmp, cub: (tmp / "checklist.csv").write_bytes(b"category,English name\nspecies,caf\xe9\n"),
        ["--cub", "{cub}", "--checklist", "{tmp}/checklist.csv", "--weights", "none"],
        ["--checklist", "checklist.csv", "not UTF-8", "fix: save it as UTF-8"],
    ),
    "checklist-without-columns": (
        lambda tmp, cub: (tmp / "checklist.csv").write_text("a,b\n1,2\n"),
        ["--cub", "{cub}", "--checklist", "{tmp}/checklist.csv", "--weights", "none"],
        ["--checklist", "checklist.csv", "no common column", "--common-column"],
    ),
    "checklist-is-a-folder": (
        lambda tmp, cub: (tmp / "checklist").mkdir(),
        ["--cub", "{cub}", "--checklist", "{tmp}/checklist", "--weights", "none"],
        ["--checklist", "is a folder, not a file"],
    ),
    "aliases-not-json": (
        lambda tmp, cub: (tmp / "a.json").write_text("{oops"),
        ["--cub", "{cub}", "--checklist", "{tmp}/checklist.csv", "--aliases", "{tmp}/a.json", "--weights", "none"],
        ["--aliases", "a.json", "not valid JSON"],
    ),
    "aliases-not-utf8": (
        lambda tmp, cub: (tmp / "a.json").write_bytes(b'{"x": "caf\xe9"}'),
        ["--cub", "{cub}", "--checklist", "{tmp}/checklist.csv", "--aliases", "{tmp}/a.json", "--weights", "none"],
        ["--aliases", "a.json", "not UTF-8", "fix:"],
    ),
    "weights-unknown-format": (
        lambda tmp, cub: (tmp / "w.csv").write_text("a,b\n"),
        ["--cub", "{cub}", "--cub-taxonomy", "{tmp}/taxonomy.csv", "--weights", "{tmp}/w.csv"],
        ["--weights", "w.csv", "unknown weights format '.csv'", "fix: pass a local Hugging Face DINOv2 folder"],
    ),
    "ray-address-without-ray": (
        lambda tmp, cub: None,
        ["--cub", "{cub}", *_TAXONOMY, "--ray-address", "auto"],
        ["--ray-address", "add --executor ray"],
    ),
    "seed-out-of-range": (
        lambda tmp, cub: None,
        ["--cub", "{cub}", *_TAXONOMY, "--seed", "99999999999999999999"],
        ["--seed", "99999999999999999999 is out of range", "from 0 to 18446744073709551615"],
    ),
    "seed-with-real-weights": (  # it named a second replication that retrained everything to the same bits
        lambda tmp, cub: (tmp / "w.safetensors").write_bytes(b"x"),
        ["--cub", "{cub}", "--cub-taxonomy", "{tmp}/taxonomy.csv", "--weights", "{tmp}/w.safetensors", "--seed", "3"],
        ["--seed 3", "only applies to --weights none", "drop --seed"],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_an_input_a_stage_would_refuse_is_refused_up_front_in_one_line(tmp_path, case, dry_run, monkeypatch):
    """Each of these once created the home and failed mid-run (a stage's "see log", a traceback, or after
    the whole pipeline had trained); now it is one line naming the option, and nothing is created."""
    monkeypatch.delenv("HIERCONSOLE_EXECUTOR", raising=False)
    arrange, args, said = _REFUSED[case]
    (tmp_path / "checklist.csv").write_text(
        "category,English name,scientific name,family\nspecies,Black-footed Albatross,Phoebastria nigripes,"
        "Diomedeidae (Albatrosses)\n"
    )
    cub = _cub(tmp_path / "CUB_200_2011")
    arrange(tmp_path, cub)
    home = tmp_path / "home"
    done = _cli(home, *(a.format(tmp=tmp_path, cub=cub) for a in args), *(["--dry-run"] if dry_run else []))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for part in said:
        assert part in done.stderr, (part, done.stderr)
    assert not home.exists()
    assert not (tmp_path / "tables.md").is_dir()


@pytest.mark.slow
def test_extract_refuses_a_seed_out_of_range_without_a_traceback(tmp_path):
    cub = _cub(tmp_path / "CUB_200_2011")
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "extract", "cub", str(cub), "-o", str(tmp_path / "f.npz"),
         "--weights", "none", "--seed", "99999999999999999999"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--seed" in done.stderr and "from 0 to 18446744073709551615" in done.stderr
    assert not (tmp_path / "f.npz").exists()
