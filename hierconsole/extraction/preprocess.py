"""DINOv2's linear-evaluation preprocessing with Pillow and numpy (no torchvision).

Resize the shorter side to 256 (bicubic, with Pillow's antialiasing, as torchvision's Resize on a PIL
image does), center-crop 224, scale to [0, 1], normalise with the ImageNet mean and std; channels first.
Sizes and crop offsets follow torchvision's formulas so features match a torchvision pipeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hierconsole.errors import REASON_CHARS, bounded

MAX_PIXELS = 89_478_485
"""Pixels an image's header may claim (Pillow's default bomb limit, about 9,459 x 9,459): far above any
photograph of a bird, far below what would exhaust the memory of a decoding worker."""
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Preprocessing:
    resize_shorter: int = 256
    crop: int = 224
    interpolation: str = "bicubic"
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD

    def record(self) -> dict:
        """What the manifest says about it."""
        return {**asdict(self), "mode": "RGB", "scale": "1/255", "layout": "CHW", "library": "Pillow+numpy"}


DINOV2_EVAL = Preprocessing()


class UnreadableImage(Exception):
    """An image file that cannot be decoded; the message says why."""


def resized_size(width: int, height: int, shorter: int) -> tuple[int, int]:
    """(width, height) with the shorter side at `shorter`, the longer scaled and truncated."""
    if width <= height:
        return shorter, int(shorter * height / width)
    return int(shorter * width / height), shorter


def crop_box(width: int, height: int, crop: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the centered `crop` x `crop` square, offsets rounded."""
    left = int(round((width - crop) / 2.0))
    top = int(round((height - crop) / 2.0))
    return left, top, left + crop, top + crop


def load_image(path: str | Path, prep: Preprocessing = DINOV2_EVAL, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """float32 [3, crop, crop] for one image file; UnreadableImage when it cannot be decoded or its header
    claims more than `max_pixels` pixels (checked before anything is decoded)."""
    from PIL import Image, UnidentifiedImageError

    # Pillow's own bomb check raises (or only warns, below twice its limit) at open; the size is checked
    # here instead, against the option's limit, so an oversized image is listed and skipped like any other.
    limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
    try:
        with Image.open(path) as img:
            width, height = img.size
            if width * height > max_pixels:
                raise UnreadableImage(
                    f"the image claims {width:,} x {height:,} = {width * height:,} pixels, over the limit of "
                    f"{max_pixels:,} (--max-pixels)"
                )
            img.load()  # decodes the whole file now, so a truncated one fails here
            rgb = img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise UnreadableImage(f"cannot decode the image: {bounded(str(exc), REASON_CHARS)}") from exc
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    if min(rgb.size) < 1:
        raise UnreadableImage(f"the image is empty ({rgb.size[0]}x{rgb.size[1]})")
    size = resized_size(*rgb.size, prep.resize_shorter)
    resample = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR}[
        prep.interpolation
    ]
    cropped = rgb.resize(size, resample).crop(crop_box(*size, prep.crop))
    scaled = np.asarray(cropped, dtype=np.float32) / np.float32(255.0)
    mean = np.asarray(prep.mean, dtype=np.float32)
    std = np.asarray(prep.std, dtype=np.float32)
    return np.ascontiguousarray(((scaled - mean) / std).transpose(2, 0, 1), dtype=np.float32)
