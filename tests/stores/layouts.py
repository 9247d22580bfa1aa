"""Small CUB_200_2011- and nabirds-layout folders with real image files, made in the test.

Each class's pictures share a colour and a pattern, so features extracted even with random weights carry
some class signal; the layouts are exactly the datasets' (images.txt, image_class_labels.txt,
train_test_split.txt, classes.txt, NABirds' hierarchy.txt), so `extract`, `import` and `replicate` read them
as they read the real ones. A generated checklist names every CUB class, for `taxonomy build-cub`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TINY_MODEL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "mlp_ratio": 2}
"""A DINOv2 config small enough that extracting a few hundred images takes seconds on a CPU."""


@dataclass(frozen=True)
class Layout:
    root: Path
    classes: int
    images: int


def tiny_model(folder: Path) -> Path:
    path = folder / "tiny-dinov2.json"
    path.write_text(json.dumps(TINY_MODEL))
    return path


def _picture(path: Path, cls: int, k: int, size: int = 24) -> None:
    from PIL import Image

    rng = np.random.default_rng(cls * 1000 + k)
    base = np.array([(cls * 53) % 256, (cls * 97) % 256, (cls * 151) % 256], dtype=np.int16)
    pixels = np.clip(base + rng.integers(-40, 40, size=(size, size, 3)), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


def _lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def make_cub(base: Path, families: int = 4, genera: int = 2, species: int = 2, per_class: int = 6) -> Layout:
    """families x genera x species classes named like CUB's, per_class images each (two thirds train)."""
    root = base / "CUB_200_2011"
    classes, image_rows, labels, flags, checklist = [], [], [], [], []
    n = 0
    for f in range(families):
        for g in range(genera):
            for s in range(species):
                cid = len(classes) + 1
                common = f"Bird{f}{g}{s} Warbler"
                folder = f"{cid:03d}.{common.replace(' ', '_')}"
                classes.append(f"{cid} {folder}")
                checklist.append(f"species,{common},Genus{f}x{g} species{s},Familyidae{f} (Birds {f})")
                for k in range(per_class):
                    n += 1
                    rel = f"{folder}/{common.replace(' ', '_')}_{k:04d}.png"
                    _picture(root / "images" / rel, cid, k)
                    image_rows.append(f"{n} {rel}")
                    labels.append(f"{n} {cid}")
                    flags.append(f"{n} {1 if k % 3 else 0}")
    _lines(root / "classes.txt", classes)
    _lines(root / "images.txt", image_rows)
    _lines(root / "image_class_labels.txt", labels)
    _lines(root / "train_test_split.txt", flags)
    _lines(base / "checklist.csv", ["category,English name,scientific name,family", *checklist])
    return Layout(root, len(classes), n)


def make_nabirds(base: Path, supergroups: int = 3, parents: int = 5, leaves: int = 2, per_class: int = 6) -> Layout:
    """A nabirds/ folder: supergroups x parents x leaves, per_class images each (half official-train)."""
    root = base / "nabirds"
    names, edges, image_rows, labels, flags = ["0 Birds"], [], [], [], []
    leaf_ids: list[int] = []
    node = 1
    for s in range(supergroups):
        sid = node
        node += 1
        names.append(f"{sid} Supergroup {s}")
        edges.append(f"{sid} 0")
        for p in range(parents):
            pid = node
            node += 1
            names.append(f"{pid} Parent {s}.{p}")
            edges.append(f"{pid} {sid}")
            for leaf in range(leaves):
                lid = node
                node += 1
                names.append(f"{lid} Bird {s}.{p}.{leaf}")
                edges.append(f"{lid} {pid}")
                leaf_ids.append(lid)
    n = 0
    for lid in leaf_ids:
        for k in range(per_class):
            n += 1
            image_id = f"{lid:04d}{k:04d}-0000-0000-0000-000000000000"
            rel = f"{lid:04d}/{image_id.replace('-', '')}.png"
            _picture(root / "images" / rel, lid, k)
            image_rows.append(f"{image_id} {rel}")
            labels.append(f"{image_id} {lid}")
            flags.append(f"{image_id} {1 if k % 2 else 0}")
    _lines(root / "classes.txt", names)
    _lines(root / "hierarchy.txt", edges)
    _lines(root / "images.txt", image_rows)
    _lines(root / "image_class_labels.txt", labels)
    _lines(root / "train_test_split.txt", flags)
    return Layout(root, len(leaf_ids), n)
