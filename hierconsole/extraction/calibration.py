"""The extractor's unit costs on this machine: building the backbone, and one image read, preprocessed and
through the network (a handful of the dataset's own images at the chosen model, random weights: the cost
does not depend on the values). `study.replication.calibration` runs this once per machine and model.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from hierconsole.extraction.architectures import Architecture
from hierconsole.extraction.backbone import build
from hierconsole.extraction.preprocess import DINOV2_EVAL, UnreadableImage, load_image

MIN_SECONDS = 0.3
"""The forward is repeated until at least this long has passed."""


def _image(path: Path) -> np.ndarray:
    """The preprocessed image; one the calibration cannot read is a blank of the crop's size (the
    network costs the same, and `extract` itself reports such a file)."""
    try:
        return load_image(path, DINOV2_EVAL)
    except (UnreadableImage, OSError):
        return np.zeros((3, DINOV2_EVAL.crop, DINOV2_EVAL.crop), dtype=np.float32)


def extraction_seconds(arch: Architecture, images: Sequence[Path]) -> tuple[float, float]:
    """(seconds to build the backbone, seconds per image) over ``images`` after the first, a warm-up."""
    started = time.perf_counter()
    model = build(arch)
    built = time.perf_counter() - started
    timed = images[1:] or images[:1]
    started = time.perf_counter()
    batch = torch.from_numpy(np.stack([_image(p) for p in timed]))
    loaded = (time.perf_counter() - started) / len(timed)
    with torch.inference_mode():
        model(pixel_values=torch.from_numpy(_image(images[0])[None]))  # warm-up
        calls: list[float] = []
        while len(calls) < 3 or sum(calls) < MIN_SECONDS:
            started = time.perf_counter()
            model(pixel_values=batch)
            calls.append(time.perf_counter() - started)
    # The median call: one stalled by another process on a shared machine does not set the cost.
    return built, loaded + statistics.median(calls) / len(timed)
