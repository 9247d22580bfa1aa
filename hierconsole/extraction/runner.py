"""The extraction loop: decode in DataLoader workers, batched frozen inference, one shard at a time.

Batches never cross a shard boundary and are cut the same way on every run, so a resumed extraction
computes each image in the same batch as an uninterrupted one and its features are bit-identical (CPU).
An unreadable image is dropped from its batch and recorded with its reason; `on_error="stop"` ends the
run at the first one, after keeping the shards already finished.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
import transformers
from torch.utils.data import DataLoader, Dataset

from hierconsole import __version__
from hierconsole.errors import InputError
from hierconsole.extraction.backbone import POSITION_INTERPOLATION, Backbone
from hierconsole.extraction.preprocess import MAX_PIXELS, Preprocessing, UnreadableImage, load_image
from hierconsole.extraction.shards import Parts, Shard, shard_ranges, write_features
from hierconsole.extraction.sources import ImageList
from hierconsole.orphans import die_with_parent

FEATURE = "pooler_output: the final-LayerNorm CLS token, as the official DINOv2 models return it"

Item = tuple[int, np.ndarray | None, str | None]


@dataclass(frozen=True)
class Settings:
    batch_size: int = 64
    shard_size: int = 1024  # a multiple of batch_size keeps every batch full
    workers: int = 2
    device: str = "cpu"
    amp: bool = False  # autocast to bfloat16 on a GPU
    on_error: str = "continue"
    stop_after: int | None = None  # stop at the first shard boundary past this many new images
    max_pixels: int = MAX_PIXELS  # an image claiming more is listed and skipped


@dataclass
class Outcome:
    out: Path
    n_images: int
    n_features: int
    failed: list[dict] = field(default_factory=list)
    finished: bool = True  # False when stop_after ended the run early
    resumed_shards: int = 0
    manifest: dict = field(default_factory=dict)


class _Images(Dataset):
    def __init__(self, images: ImageList, prep: Preprocessing, max_pixels: int = MAX_PIXELS):
        self.images = images
        self.prep = prep
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> Item:
        path = self.images.file(i)
        if not path.exists():
            return i, None, "the file does not exist"
        try:
            return i, load_image(path, self.prep, self.max_pixels), None
        except UnreadableImage as exc:
            return i, None, str(exc)


def _collate(items: list[Item]) -> list[Item]:
    return items  # stacking happens after the unreadable ones are dropped


def identity(images: ImageList, backbone: Backbone, prep: Preprocessing, settings: Settings) -> dict:
    """Everything the features depend on: a resume must match it exactly."""
    import hashlib

    listing = hashlib.sha256(
        "\n".join(f"{i} {p}" for i, p in zip(images.ids, images.paths, strict=True)).encode()
    )
    # Through JSON and back, so it compares equal to the copy a previous run wrote (tuples become lists).
    return json.loads(
        json.dumps(
            {
                "images_sha256": listing.hexdigest(),
                "n_images": len(images),
                "model": backbone.arch.config,
                "weights": backbone.weights.record(),
                "preprocessing": prep.record(),
                "position_interpolation": POSITION_INTERPOLATION,
                "batch_size": settings.batch_size,
                "shard_size": settings.shard_size,
                "device_type": torch.device(settings.device).type,
                "amp": settings.amp,
                "max_pixels": settings.max_pixels,  # which images are skipped, so which rows exist
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            }
        )
    )


def run_extraction(
    images: ImageList,
    backbone: Backbone,
    prep: Preprocessing,
    out: Path,
    settings: Settings,
    *,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> Outcome:
    """Extract every image of `images` into `out` (.npz), resuming from `out`'s .parts folder."""
    ident = identity(images, backbone, prep, settings)
    parts = Parts(out)
    shards = shard_ranges(len(images), settings.shard_size)
    resumed = parts.done(len(shards)) if parts.check(ident) else set()
    parts.start(ident)
    todo = [k for k in range(len(shards)) if k not in resumed]
    if settings.stop_after is not None:
        todo = _first_covering(todo, shards, settings.stop_after)
    device = torch.device(settings.device)
    model = backbone.model.to(device)  # type: ignore[arg-type]  # transformers types .to() oddly
    batches = [
        list(shards[k][start : start + settings.batch_size])
        for k in todo
        for start in range(0, len(shards[k]), settings.batch_size)
    ]
    loader = DataLoader(
        _Images(images, prep, settings.max_pixels),
        batch_sampler=batches,
        num_workers=settings.workers,
        collate_fn=_collate,
        persistent_workers=False,
        worker_init_fn=die_with_parent,
    )
    non_blocking = device.type == "cuda"
    done = sum(len(shards[k]) for k in resumed)
    progress(done, len(images))
    pending: dict[int, list[Item]] = {}
    shard_of = {i: k for k in todo for i in shards[k]}
    features_of: dict[int, np.ndarray] = {}
    with torch.inference_mode():
        for batch in loader:
            good = [item for item in batch if item[1] is not None]
            if good:
                x = torch.from_numpy(np.stack([item[1] for item in good if item[1] is not None])).to(
                    device, non_blocking=non_blocking
                )
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=settings.amp):
                    f = model(pixel_values=x).pooler_output
                f_np = f.float().cpu().numpy()
                for (i, _, _), row in zip(good, f_np, strict=True):
                    features_of[i] = row
            bad = [item for item in batch if item[1] is None]
            if bad and settings.on_error == "stop":
                i, _, reason = bad[0]
                raise InputError(
                    images.file(i),
                    f"image {images.ids[i]!r}: {reason}",
                    hint="fix or remove the image and rerun (finished shards are kept), "
                    "or pass --on-error continue",
                )
            k = shard_of[batch[0][0]]
            pending.setdefault(k, []).extend(batch)
            if len(pending[k]) == len(shards[k]):
                parts.write(k, _shard(pending.pop(k), features_of, backbone.dim))
            done += len(batch)
            progress(done, len(images))
    if settings.stop_after is not None and len(parts.done(len(shards))) < len(shards):
        return Outcome(out, len(images), 0, finished=False, resumed_shards=len(resumed))
    return _assemble(images, backbone, prep, settings, parts, shards, out, ident, len(resumed))


def _first_covering(todo: list[int], shards: list[range], n: int) -> list[int]:
    taken, count = [], 0
    for k in todo:
        if count >= n:
            break
        taken.append(k)
        count += len(shards[k])
    return taken


def _shard(items: list[Item], features_of: dict[int, np.ndarray], dim: int) -> Shard:
    items = sorted(items, key=lambda item: item[0])
    rows = np.array([i for i, x, _ in items if x is not None], dtype=np.int64)
    feats = np.stack([features_of.pop(int(i)) for i in rows]) if len(rows) else np.zeros((0, dim), np.float32)
    return Shard(
        rows=rows,
        features=feats.astype(np.float32),
        failed_rows=np.array([i for i, x, _ in items if x is None], dtype=np.int64),
        failed_reasons=tuple(str(reason) for _, x, reason in items if x is None),
    )


def _assemble(
    images: ImageList,
    backbone: Backbone,
    prep: Preprocessing,
    settings: Settings,
    parts: Parts,
    shards: list[range],
    out: Path,
    ident: dict,
    resumed: int,
) -> Outcome:
    read = [parts.read(k) for k in range(len(shards))]
    rows = np.concatenate([s.rows for s in read])
    features = np.concatenate([s.features for s in read]).reshape(len(rows), backbone.dim)
    failed = [
        {"id": images.ids[int(i)], "path": images.paths[int(i)], "reason": reason}
        for s in read
        for i, reason in zip(s.failed_rows.tolist(), s.failed_reasons, strict=True)
    ]
    if not len(rows):
        first = failed[0]
        # Nothing to resume: kept, the parts would mark every shard done, and a rerun once the images are
        # fixed would refuse again without reading them.
        parts.remove()
        raise InputError(
            images.base,
            f"none of the {len(images)} images could be read; the first, {first['path']}: {first['reason']}",
            hint="check that the folder holds the images images.txt (or the list) names",
        )
    manifest = manifest_of(images, backbone, prep, settings, ident, len(rows), failed)
    write_features(out, [images.ids[int(i)] for i in rows], features, manifest)
    parts.remove()
    return Outcome(out, len(images), len(rows), failed, True, resumed, manifest)


def manifest_of(
    images: ImageList,
    backbone: Backbone,
    prep: Preprocessing,
    settings: Settings,
    ident: dict,
    n_features: int,
    failed: list[dict],
) -> dict:
    device = torch.device(settings.device)
    device_name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{platform.machine()}, {os.cpu_count()} cores"
    )
    return {
        "format": 1,
        "tool": f"hierconsole {__version__} extract",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": {"kind": images.kind, "root": str(images.root.resolve()), "listing": images.listing},
        "n_images": len(images),
        "n_features": n_features,
        "ids": f"the image ids of {images.listing}, in its order (unreadable images left out)",
        "failed": failed,
        "model": {
            "name": backbone.arch.name,
            "label": backbone.arch.label,
            "dim": backbone.dim,
            "config": backbone.arch.config,
        },
        "feature": FEATURE,
        "position_interpolation": POSITION_INTERPOLATION,
        "weights": backbone.weights.record(),
        "preprocessing": prep.record(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": f"{device.type} ({device_name})",
        "precision": "bfloat16 autocast" if settings.amp else "float32",
        "threads": torch.get_num_threads(),
        "batch_size": settings.batch_size,
        "shard_size": settings.shard_size,
        "images_sha256": ident["images_sha256"],
    }
