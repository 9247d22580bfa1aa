"""The named backbones carry the official DINOv2 hyperparameters, and a Hugging Face config.json of a
facebook/dinov2-* snapshot is recognised as the named model it is."""

from __future__ import annotations

import json

import pytest

from hierconsole.errors import InputError
from hierconsole.extraction.architectures import ARCHITECTURES, architecture

# The config.json of the facebook/dinov2-base snapshot, as published.
DINOV2_BASE_CONFIG = {
    "architectures": ["Dinov2Model"],
    "attention_probs_dropout_prob": 0.0,
    "drop_path_rate": 0.0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "hidden_size": 768,
    "image_size": 518,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-06,
    "layerscale_value": 1.0,
    "mlp_ratio": 4,
    "model_type": "dinov2",
    "num_attention_heads": 12,
    "num_channels": 3,
    "num_hidden_layers": 12,
    "patch_size": 14,
    "qkv_bias": True,
    "torch_dtype": "float32",
    "transformers_version": "4.31.0.dev0",
    "use_swiglu_ffn": False,
}


@pytest.mark.parametrize(
    ("name", "dim", "layers", "heads"),
    [("vits14", 384, 12, 6), ("vitb14", 768, 12, 12), ("vitl14", 1024, 24, 16)],
)
def test_the_official_sizes(name, dim, layers, heads):
    cfg = ARCHITECTURES[name].config
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (dim, layers, heads)
    assert cfg["patch_size"] == 14 and cfg["image_size"] == 518 and cfg["mlp_ratio"] == 4


def test_a_dinov2_base_config_is_vitb14(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DINOV2_BASE_CONFIG))
    assert architecture(str(path)) is ARCHITECTURES["vitb14"]


def test_a_foreign_config_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**DINOV2_BASE_CONFIG, "model_type": "vit"}))
    with pytest.raises(InputError, match="only DINOv2 models"):
        architecture(str(path))
