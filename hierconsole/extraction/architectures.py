"""The DINOv2 backbones by name, with the hyperparameters of the official releases.

Torch-free, so the CLI can check a model name (or a config file) before loading anything heavy. The
values are those of Meta's ViT-S/14, ViT-B/14 and ViT-L/14 (as in the `facebook/dinov2-*` configs):
patch 14, position embeddings for 518-pixel inputs (interpolated to the 224 crop), MLP ratio 4, GELU,
LayerScale, LayerNorm eps 1e-6. A JSON file of Dinov2Config fields names any other variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hierconsole.errors import InputError
from hierconsole.json_input import read_json

DEFAULT_MODEL = "vitb14"

_COMMON = {
    "patch_size": 14,
    "image_size": 518,
    "mlp_ratio": 4,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-6,
    "layerscale_value": 1.0,
    "qkv_bias": True,
    "use_swiglu_ffn": False,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "drop_path_rate": 0.0,
    "num_channels": 3,
}


@dataclass(frozen=True)
class Architecture:
    name: str
    label: str  # how messages name it
    config: dict  # Dinov2Config keyword arguments

    @property
    def dim(self) -> int:
        return int(self.config["hidden_size"])

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    def describe(self) -> str:
        return (
            f"{self.label} ({self.dim}-D, {self.layers} layers, {self.config['num_attention_heads']} heads)"
        )


ARCHITECTURES: dict[str, Architecture] = {
    "vits14": Architecture(
        "vits14",
        "DINOv2 ViT-S/14",
        {**_COMMON, "hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 6},
    ),
    "vitb14": Architecture(
        "vitb14",
        "DINOv2 ViT-B/14",
        {**_COMMON, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12},
    ),
    "vitl14": Architecture(
        "vitl14",
        "DINOv2 ViT-L/14",
        {**_COMMON, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16},
    ),
}

_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads")
_SIZES = ("patch_size", "image_size", "mlp_ratio", "num_channels")
"""The other fields that size the network: each a number > 0."""
MAX_PARAMETERS = 4_000_000_000
"""The most weights a config may describe (ViT-g/14 has 1.1 billion): a typo of a few digits would
otherwise be found by the allocator, killing the process, not by a message."""
_KNOWN = set(_COMMON) | set(_REQUIRED) | {"model_type", "initializer_range", "apply_layernorm"}


def architecture(model: str) -> Architecture:
    """A named backbone, or a JSON file of Dinov2Config fields (missing fields take the official values)."""
    if model in ARCHITECTURES:
        return ARCHITECTURES[model]
    path = Path(model)
    if path.suffix.lower() != ".json":
        raise InputError(
            "--model",
            f"unknown model {model!r}",
            hint=f"use one of {', '.join(ARCHITECTURES)}, or a .json file of Dinov2Config fields",
        )
    return config_file(path)


def config_file(path: Path) -> Architecture:
    """The architecture a Dinov2Config JSON (e.g. a Hugging Face model folder's config.json) describes."""
    raw = read_json(path, "the model config", hint="give a JSON file of Dinov2Config fields", kind="a model config")
    if not isinstance(raw, dict):
        raise InputError(path, "the model config must be a JSON object of Dinov2Config fields")
    problems = []
    if raw.get("model_type", "dinov2") != "dinov2":
        problems.append(
            f"model_type is {raw['model_type']!r}; only DINOv2 models (model_type 'dinov2') are supported"
        )
    problems += [f"no {key!r}" for key in _REQUIRED if not _positive(raw.get(key), integer=True)]
    problems += [f"{key} = {raw[key]!r}: expected a number > 0" for key in _SIZES if key in raw and not _positive(raw[key])]
    if problems:
        raise InputError(path, problems, hint="give a DINOv2 config (hidden_size, num_hidden_layers, ...)")
    config = {**_COMMON, **{k: v for k, v in raw.items() if k in _KNOWN and k != "model_type"}}
    if _parameters(config) > MAX_PARAMETERS:
        raise InputError(
            path,
            f"describes about {_parameters(config):.3g} weights, over the {MAX_PARAMETERS:,} a backbone may have",
            hint="check hidden_size, num_hidden_layers, mlp_ratio and image_size",
        )
    if config["hidden_size"] % config["num_attention_heads"]:
        raise InputError(path, "hidden_size is not a multiple of num_attention_heads")
    named = next((a for a in ARCHITECTURES.values() if same_network(a.config, config)), None)
    if named is not None:
        return named
    return Architecture(str(path), f"DINOv2 variant from {path.name}", config)


def _positive(value: object, *, integer: bool = False) -> bool:
    kinds = (int,) if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and value > 0 and value < float("inf")


def _parameters(config: dict) -> float:
    """About how many weights a config's network has: its blocks (attention and MLP), the patch embedding
    and the position embeddings, in floats so that no size overflows."""
    h, layers, ratio = float(config["hidden_size"]), float(config["num_hidden_layers"]), float(config["mlp_ratio"])
    patch, image, channels = float(config["patch_size"]), float(config["image_size"]), float(config["num_channels"])
    return layers * (4 + 2 * ratio) * h * h + (image / patch) ** 2 * h + channels * patch * patch * h


def same_network(a: dict, b: dict) -> bool:
    """Whether two configs describe the same network (initialisation settings aside)."""
    return all(a.get(k) == b.get(k) for k in (*_COMMON, *_REQUIRED))


def matching(config: dict) -> str:
    """Which named backbone these hyperparameters are, for messages; else a short description."""
    for arch in ARCHITECTURES.values():
        if all(config[k] == arch.config[k] for k in _REQUIRED if k in config):
            return f"{arch.label} (--model {arch.name})"
    return "a DINOv2 of hidden size {hidden_size}, {num_hidden_layers} layers".format(
        hidden_size=config.get("hidden_size", "?"), num_hidden_layers=config.get("num_hidden_layers", "?")
    )
