"""Preprocessing against torchvision's Resize(256)/CenterCrop(224) arithmetic and the ImageNet constants."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

from hierconsole.extraction.preprocess import (  # noqa: E402
    IMAGENET_MEAN,
    IMAGENET_STD,
    UnreadableImage,
    crop_box,
    load_image,
    resized_size,
)


@pytest.mark.parametrize(
    ("size", "resized", "box"),
    [
        # torchvision: the shorter side becomes 256, the longer int(256 * long / short); crop offsets
        # int(round((side - 224) / 2)).
        ((500, 375), (341, 256), (58, 16, 282, 240)),
        ((375, 500), (256, 341), (16, 58, 240, 282)),
        ((256, 256), (256, 256), (16, 16, 240, 240)),
        ((100, 30), (853, 256), (314, 16, 538, 240)),
        ((41, 40), (262, 256), (19, 16, 243, 240)),
    ],
)
def test_sizes_and_crops_follow_torchvision(size, resized, box):
    assert resized_size(*size, 256) == resized
    assert crop_box(*resized, 224) == box


def test_a_uniform_image_normalises_to_the_imagenet_constants(tmp_path):
    rgb = (200, 100, 50)
    path = tmp_path / "flat.png"
    Image.new("RGB", (90, 60), rgb).save(path)
    x = load_image(path)
    assert x.shape == (3, 224, 224) and x.dtype == np.float32
    for c in range(3):
        expected = (rgb[c] / 255.0 - IMAGENET_MEAN[c]) / IMAGENET_STD[c]
        np.testing.assert_allclose(x[c], expected, rtol=0, atol=1e-6)


def test_layout_and_content_match_a_direct_pillow_pipeline(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(70, 110, 3), dtype=np.uint8)
    path = tmp_path / "noise.png"
    Image.fromarray(pixels).save(path)
    # The reference, written out: 110x70 -> 402x256 (bicubic), crop (89, 16)-(313, 240), HWC -> CHW.
    ref = np.asarray(
        Image.fromarray(pixels).resize((402, 256), Image.Resampling.BICUBIC).crop((89, 16, 313, 240)),
        dtype=np.float64,
    )
    ref = ((ref / 255.0 - np.array(IMAGENET_MEAN)) / np.array(IMAGENET_STD)).transpose(2, 0, 1)
    np.testing.assert_allclose(load_image(path), ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "CMYK"])
def test_every_mode_becomes_three_channels(tmp_path, mode):
    path = tmp_path / f"img.{'jpg' if mode == 'CMYK' else 'png'}"
    Image.new("RGB", (30, 50), (10, 200, 30)).convert(mode).save(path)
    assert load_image(path).shape == (3, 224, 224)


def test_truncated_and_foreign_files_are_unreadable_with_a_reason(tmp_path):
    jpeg = tmp_path / "cut.jpg"
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(jpeg)
    jpeg.write_bytes(jpeg.read_bytes()[:300])
    with pytest.raises(UnreadableImage, match="truncated|cannot decode"):
        load_image(jpeg)
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    with pytest.raises(UnreadableImage, match="cannot identify"):
        load_image(text)
