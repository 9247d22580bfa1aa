"""Tiny CUB-200-2011 and NABirds folders in their exact file formats, built in tmp_path."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

DIM = 8


@dataclass
class Built:
    root: Path
    features: Path  # .npz with `features` and `ids`
    taxonomy: Path | None
    ids: list[str]
    paths: list[str]
    x: np.ndarray  # features in images.txt order

    def file(self, name: str) -> Path:
        return self.root / name

    def lines(self, name: str) -> list[str]:
        return self.file(name).read_text().splitlines()

    def set_lines(self, name: str, lines: list[str]) -> None:
        self.file(name).write_text("\n".join(lines) + "\n")

    def tree(self) -> dict[str, bytes]:
        """Every file under the folder's parent, to show an import wrote nothing."""
        base = self.root.parent
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


CUB_CLASSES = [
    ("1", "001.Black_footed_Albatross"),
    ("2", "002.Laysan_Albatross"),
    ("3", "003.Sooty Albatross"),  # a space inside the name: split on the first whitespace only
    ("4", "004.Groove_billed_Ani"),
]
# Leaf names as a user might write them: full, without prefix, and case/underscore-insensitive.
CUB_TAXONOMY = [
    "leaf,middle,high",
    "001.Black_footed_Albatross,Phoebastria,Diomedeidae",
    "Laysan_Albatross,Phoebastria,Diomedeidae",
    "sooty albatross,Phoebetria,Diomedeidae",
    "004.Groove_billed_Ani,Crotophaga,Cuculidae",
]


@pytest.fixture
def cub(tmp_path: Path) -> Built:
    root = tmp_path / "CUB_200_2011"
    rng = np.random.default_rng(0)
    ids, paths, labels, flags = [], [], [], []
    n = 0
    for cid, name in CUB_CLASSES:
        for k in range(3):
            n += 1
            ids.append(str(n))
            paths.append(f"{name}/{name.split('.', 1)[1]} {k:04d}.jpg")
            labels.append(cid)
            flags.append("1" if k < 2 else "0")
    _write(root / "images.txt", [f"{i} {p}" for i, p in zip(ids, paths, strict=True)])
    _write(root / "image_class_labels.txt", [f"{i} {c}" for i, c in zip(ids, labels, strict=True)])
    _write(root / "train_test_split.txt", [f"{i} {f}" for i, f in zip(ids, flags, strict=True)])
    _write(root / "classes.txt", [f"{c} {name}" for c, name in CUB_CLASSES])
    tax = tmp_path / "cub_taxonomy.csv"
    _write(tax, CUB_TAXONOMY)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    # features stored in a different order than images.txt, keyed by image id
    order = rng.permutation(n)
    feats = tmp_path / "cub_features.npz"
    np.savez(feats, features=x[order], ids=np.array(ids)[order])
    return Built(root, feats, tax, ids, paths, x)


NABIRDS_CLASSES = [
    ("0", "Birds"),
    ("1", "Perching Birds"),
    ("2", "Waterfowl"),
    ("10", "Chickadees"),
    ("11", "Sparrows"),
    ("20", "Ducks"),
    ("100", "Black-capped Chickadee"),
    ("101", "Carolina Chickadee"),
    ("110", "Song Sparrow"),
    ("111", "Dark-eyed Junco"),
    ("112", "Dark-eyed Junco"),  # two nodes share a name
    ("120", "Red-winged Blackbird"),  # hangs directly under a supergroup
    ("200", "Mallard (Male)"),
    ("201", "Mallard (Female/juvenile)"),
    ("300", "Unused leaf"),  # in the tree but no images: not a leaf of the taxonomy
]
NABIRDS_EDGES = [
    ("1", "0"),
    ("2", "0"),
    ("10", "1"),
    ("11", "1"),
    ("20", "2"),
    ("100", "10"),
    ("101", "10"),
    ("110", "11"),
    ("111", "11"),
    ("112", "11"),
    ("120", "1"),
    ("200", "20"),
    ("201", "20"),
    ("300", "20"),
]
NABIRDS_LEAVES = ["100", "101", "110", "111", "112", "120", "200", "201"]


@pytest.fixture
def nabirds(tmp_path: Path) -> Built:
    root = tmp_path / "nabirds"
    rng = np.random.default_rng(1)
    ids, paths, labels, flags = [], [], [], []
    n = 0
    for cid in NABIRDS_LEAVES:
        for k in range(2):
            ids.append(str(uuid.UUID(int=rng.integers(1 << 62).item())))
            paths.append(f"{int(cid):04d}/{ids[-1].replace('-', '')}.jpg")
            labels.append(cid)
            flags.append("1" if k == 0 else "0")
            n += 1
    _write(root / "images.txt", [f"{i} {p}" for i, p in zip(ids, paths, strict=True)])
    _write(root / "image_class_labels.txt", [f"{i} {c}" for i, c in zip(ids, labels, strict=True)])
    _write(root / "train_test_split.txt", [f"{i} {f}" for i, f in zip(ids, flags, strict=True)])
    _write(root / "classes.txt", [f"{c} {name}" for c, name in NABIRDS_CLASSES])
    _write(root / "hierarchy.txt", [f"{c} {p}" for c, p in NABIRDS_EDGES])
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    feats = tmp_path / "nabirds_features.npz"
    np.savez(feats, features=x, ids=np.array(ids))
    return Built(root, feats, None, ids, paths, x)
