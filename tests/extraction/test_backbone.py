"""The backbone resizes its position embeddings as Meta's DINOv2 does (scale factor with a 0.1 offset),
not as `transformers` does by default (an output size); the two differ at the 224-pixel crop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import Dinov2Config, Dinov2Model

from hierconsole.extraction.architectures import ARCHITECTURES, Architecture
from hierconsole.extraction.backbone import build
from tests.extraction.conftest import TINY

ARCH = Architecture("tiny", "tiny", {**ARCHITECTURES["vits14"].config, **TINY})


def meta_reference(pos: torch.Tensor, rows: int) -> torch.Tensor:
    """Meta's vision_transformer.interpolate_pos_encoding for a square input, written out."""
    side = int((pos.shape[1] - 1) ** 0.5)
    grid = pos[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
    scale = (rows + 0.1) / side
    grid = F.interpolate(grid, scale_factor=(scale, scale), mode="bicubic", antialias=False)
    return torch.cat((pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, rows * rows, -1)), dim=1)


def test_position_embeddings_follow_meta_at_224():
    torch.manual_seed(0)
    model = build(ARCH)
    with torch.no_grad():
        model.embeddings.position_embeddings.normal_()
    tokens = torch.zeros(1, 1 + 16 * 16, TINY["hidden_size"])
    ours = model.embeddings.interpolate_pos_encoding(tokens, 224, 224)
    pos = model.embeddings.position_embeddings
    assert ours.shape == (1, 257, TINY["hidden_size"])
    torch.testing.assert_close(ours, meta_reference(pos, 16), rtol=0, atol=0)
    # transformers' own resize (an output size) is measurably different: the override matters
    stock = type(model.embeddings).interpolate_pos_encoding(model.embeddings, tokens, 224, 224)
    assert (stock - ours).abs().max() > 1e-3


def test_at_the_native_size_nothing_is_resized():
    model = build(ARCH)
    tokens = torch.zeros(1, 1 + 37 * 37, TINY["hidden_size"])
    assert model.embeddings.interpolate_pos_encoding(tokens, 518, 518) is model.embeddings.position_embeddings


@pytest.mark.parametrize("batch", [1, 3])
def test_the_feature_is_the_layer_normed_cls_token(batch):
    torch.manual_seed(1)
    model = build(ARCH)
    x = torch.randn(batch, 3, 224, 224)
    with torch.inference_mode():
        out = model(pixel_values=x, output_hidden_states=True)
        last_block = out.hidden_states[-1]  # the last block's output, before the final LayerNorm
        expected = model.layernorm(last_block)[:, 0]
    torch.testing.assert_close(out.pooler_output, expected, rtol=0, atol=0)
    assert not torch.allclose(last_block[:, 0], expected)
    assert isinstance(model, Dinov2Model) and isinstance(model.config, Dinov2Config)
