"""The shipped presets of the paper's Sec. 5.1 contextual runs validate, are listed, and run end to end
(smoke-sized with --set) on generated NABirds- and CUB-layout folders: NABirds seen-class evaluation with
the Taxonomy-SupCon cell and the HIER-style arm on the official split, and CUB's 32-D Euclidean
taxonomy-regression projector beside HIER-style and frozen features."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from hierconsole.config import load_preset
from hierconsole.vocabulary import EUCLIDEAN, HIER_AUTHORS, REGRESSION, SUPCON, arm_name
from tests.datasets.conftest import CUB_CLASSES, CUB_TAXONOMY, NABIRDS_CLASSES, NABIRDS_EDGES, NABIRDS_LEAVES
from tests.stores.real import cli

DIM = 32
TRAIN, TEST = 7, 5
"""Images per leaf in the official train and test splits of the generated folders."""
SMOKE = [
    "--epochs", "1", "--seeds", "42",
    "--set", "expected=none", "--set", "evaluation.n_query=8", "--set", "compute.device=cpu",
    "--set", "training.batch_size=16", "--set", "training.hidden=16", "--set", "training.out_dim=8",
    "--set", "baselines.hier.proxies=8", "--set", "baselines.hier.triplets_per_anchor=3",
    "--set", "baselines.hier.topk=3", "--set", "baselines.hier.batch_size=8",
]  # fmt: skip
PRESETS = {
    # preset: (the cell it trains, its dataset's import)
    "nabirds-seen-class": arm_name(EUCLIDEAN, SUPCON),
    "cub-taxonomy-regression": arm_name(EUCLIDEAN, REGRESSION),
}


def _lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _features(leaves: list[str], ids: list[str], labels: list[str], seed: int) -> np.ndarray:
    """Each image its leaf's centre plus noise, so a projector has something to learn."""
    rng = np.random.default_rng(seed)
    centre = {leaf: rng.normal(size=DIM) * 2 for leaf in leaves}
    return np.stack([centre[label] + rng.normal(size=DIM) for label in labels]).astype(np.float32)


def nabirds_folder(base: Path) -> list[str]:
    """A NABirds-layout folder (images, labels, official split, classes, hierarchy) and its features;
    the arguments of `import nabirds`."""
    root, ids, paths, labels, flags = base / "nabirds", [], [], [], []
    rng = np.random.default_rng(3)
    for cid in NABIRDS_LEAVES:
        for k in range(TRAIN + TEST):
            ids.append(str(uuid.UUID(int=int(rng.integers(1 << 62)))))
            paths.append(f"{int(cid):04d}/{ids[-1].replace('-', '')}.jpg")
            labels.append(cid)
            flags.append("1" if k < TRAIN else "0")
    _lines(root / "images.txt", [f"{i} {p}" for i, p in zip(ids, paths, strict=True)])
    _lines(root / "image_class_labels.txt", [f"{i} {c}" for i, c in zip(ids, labels, strict=True)])
    _lines(root / "train_test_split.txt", [f"{i} {f}" for i, f in zip(ids, flags, strict=True)])
    _lines(root / "classes.txt", [f"{c} {name}" for c, name in NABIRDS_CLASSES])
    _lines(root / "hierarchy.txt", [f"{c} {p}" for c, p in NABIRDS_EDGES])
    features = base / "nabirds_features.npz"
    np.savez(features, features=_features(NABIRDS_LEAVES, ids, labels, 4), ids=np.array(ids))
    return ["import", "nabirds", str(root), str(features)]


def cub_folder(base: Path) -> list[str]:
    """A CUB-200-2011-layout folder, its features and a taxonomy CSV; the arguments of `import cub`."""
    root, ids, paths, labels, flags = base / "CUB_200_2011", [], [], [], []
    for cid, name in CUB_CLASSES:
        for k in range(TRAIN + TEST):
            ids.append(str(len(ids) + 1))
            paths.append(f"{name}/{name.split('.', 1)[1]}_{k:04d}.jpg")
            labels.append(cid)
            flags.append("1" if k < TRAIN else "0")
    _lines(root / "images.txt", [f"{i} {p}" for i, p in zip(ids, paths, strict=True)])
    _lines(root / "image_class_labels.txt", [f"{i} {c}" for i, c in zip(ids, labels, strict=True)])
    _lines(root / "train_test_split.txt", [f"{i} {f}" for i, f in zip(ids, flags, strict=True)])
    _lines(root / "classes.txt", [f"{c} {name}" for c, name in CUB_CLASSES])
    taxonomy = base / "cub_taxonomy.csv"
    _lines(taxonomy, CUB_TAXONOMY)
    features = base / "cub_features.npz"
    np.savez(features, features=_features([c for c, _ in CUB_CLASSES], ids, labels, 5), ids=np.array(ids))
    return ["import", "cub", str(root), str(features), str(taxonomy)]


FOLDERS = {"nabirds-seen-class": nabirds_folder, "cub-taxonomy-regression": cub_folder}


@pytest.mark.parametrize("name", PRESETS)
def test_the_contextual_presets_validate_and_keep_the_protocol(name):
    preset = load_preset(name)
    assert preset.split.protocol == "official"
    assert preset.cells == (PRESETS[name],)
    assert preset.evaluation.baselines == ("frozen", "hier")
    assert preset.baselines.hier.recipe == HIER_AUTHORS  # the paper reports the authors' HIER
    assert preset.training.out_dim == 32 and preset.training.epochs == 100
    assert preset.tuned_geometries == ()
    expected = preset.expected.declared()
    # The declared query and gallery images are the declared test images, split.
    assert expected["query_images"] + expected["gallery_images"] == expected["test_images"]
    assert expected["query_images"] == preset.evaluation.n_query
    assert expected["updates_per_epoch"] == expected["development_images"] // preset.training.batch_size


@pytest.mark.slow  # the CLI in a subprocess
@pytest.mark.parametrize("name", PRESETS)
def test_the_contextual_presets_are_listed(tmp_path, name):
    done = cli(tmp_path / "home", "--help", columns=200)
    assert done.returncode == 0
    shipped = done.stdout.split("shipped presets", 1)[1].split("shipped families", 1)[0]
    assert name in shipped.replace(",", " ").split()


@pytest.mark.slow  # imports and a study in subprocesses
@pytest.mark.parametrize("name", PRESETS)
def test_each_contextual_preset_runs_on_data_of_its_layout(tmp_path, name):
    home = tmp_path / "home"
    imported = cli(home, *FOLDERS[name](tmp_path))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    ran = cli(home, "run", name, *SMOKE, columns=200, timeout=600)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr
    n_leaves = len(NABIRDS_LEAVES) if name == "nabirds-seen-class" else len(CUB_CLASSES)
    assert "the dataset's official train images" in ran.stdout
    study = ran.stdout.split("study ", 1)[1].split(":", 1)[0].strip()
    effects = cli(home, "effects", study, "--json")
    assert effects.returncode == 0, effects.stderr
    scored = {(a["arm"], a["metric"]) for a in json.loads(effects.stdout)["arms"] if a["mean"] is not None}
    for arm in (PRESETS[name], "frozen", "hier"):
        assert (arm, "leaf_mAP") in scored and (arm, "middle_mAP") in scored, (arm, scored)
    # The official split: every train image trains, every test image is tested.
    plan = cli(home, "run", name, *SMOKE, "--dry-run", columns=200)
    assert plan.returncode == 0, plan.stderr
    cells = {
        parts[0]: parts[1]
        for line in plan.stdout.splitlines()
        if len(parts := [c.strip() for c in line.split("│") if c.strip()]) == 3
    }
    assert cells["train"] == str(n_leaves * TRAIN) and cells["test"] == str(n_leaves * TEST)
    assert cells["development"] == str(n_leaves * TRAIN)
    # The authors' class-balanced batch of 180 cannot be filled by this smoke data: refused, with the fit.
    smoke = SMOKE[:-2]  # without its baselines.hier.batch_size
    refused = cli(home, "run", name, *smoke, "--dry-run", columns=200)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    assert "baselines.hier.batch_size = 180" in said and f"baselines.hier.batch_size={n_leaves * TRAIN // 2 * 2}" in said, said
