"""A small CUB-layout image folder (PNG and JPEG, several modes and sizes, one truncated JPEG) and a tiny
DINOv2 config, so extraction runs in a second on CPU."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the 'extract' extra is not installed")
pytest.importorskip("PIL", reason="the 'extract' extra is not installed")

from PIL import Image  # noqa: E402

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "mlp_ratio": 2}
CLASSES = [("1", "001.Black_footed_Albatross"), ("2", "002.Laysan_Albatross"), ("3", "003.Groove_billed_Ani")]
N_IMAGES = 30
CORRUPT = 7  # 1-based image id of the truncated JPEG


@dataclass
class ImageFolder:
    root: Path
    ids: list[str]
    paths: list[str]
    taxonomy: Path

    def image(self, image_id: str) -> Path:
        return self.root / "images" / self.paths[self.ids.index(image_id)]

    def repair(self, image_id: str) -> None:
        """Replace an image by a readable one of its own kind."""
        path = self.image(image_id)
        path.unlink()
        img = _picture(int(image_id))
        (img.convert("RGB") if path.suffix == ".jpg" else img).save(path)


def _picture(k: int) -> Image.Image:
    rng = np.random.default_rng(k)
    h, w = 40 + 7 * (k % 5), 48 + 11 * (k % 4)  # portrait, landscape and square images
    pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    img = Image.fromarray(pixels)
    return {0: img, 1: img.convert("L"), 2: img.convert("RGBA"), 3: img.convert("P")}[k % 4] if k % 3 else img


def make_cub_folder(base: Path) -> ImageFolder:
    root = base / "CUB_200_2011"
    ids, paths, labels, flags = [], [], [], []
    for k in range(1, N_IMAGES + 1):
        cid, name = CLASSES[k % len(CLASSES)]
        img = _picture(k)
        suffix = "jpg" if k % 2 or k == CORRUPT else "png"
        rel = f"{name}/{name.split('.', 1)[1]}_{k:04d}.{suffix}"
        path = root / "images" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (img.convert("RGB") if suffix == "jpg" else img).save(path)
        ids.append(str(k))
        paths.append(rel)
        labels.append(cid)
        flags.append("1" if k % 3 else "0")
    corrupt = root / "images" / paths[CORRUPT - 1]
    corrupt.write_bytes(corrupt.read_bytes()[:200])  # a download cut short
    (root / "images.txt").write_text("".join(f"{i} {p}\n" for i, p in zip(ids, paths, strict=True)))
    (root / "image_class_labels.txt").write_text(
        "".join(f"{i} {c}\n" for i, c in zip(ids, labels, strict=True))
    )
    (root / "train_test_split.txt").write_text("".join(f"{i} {f}\n" for i, f in zip(ids, flags, strict=True)))
    (root / "classes.txt").write_text("".join(f"{c} {n}\n" for c, n in CLASSES))
    taxonomy = base / "cub_taxonomy.csv"
    taxonomy.write_text(
        "class,genus,family\n"
        "001.Black_footed_Albatross,Phoebastria,Diomedeidae\n"
        "002.Laysan_Albatross,Phoebastria,Diomedeidae\n"
        "003.Groove_billed_Ani,Crotophaga,Cuculidae\n"
    )
    return ImageFolder(root, ids, paths, taxonomy)


@pytest.fixture
def cub_images(tmp_path: Path) -> ImageFolder:
    return make_cub_folder(tmp_path)


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path
