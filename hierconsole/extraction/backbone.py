"""The frozen DINOv2 backbone (Hugging Face `transformers`), built from our own config, never downloaded.

The feature is the layer-normed CLS token (`pooler_output`), what the official DINOv2 models return.
A state dict may come in the current `transformers` naming, the older one (`attention.attention.query`),
or Meta's original (`blocks.N.attn.qkv`); all are renamed to the current layout, then loaded strictly:
a missing, unexpected or misshapen tensor is an error naming the architecture it was expected to be.
"""

from __future__ import annotations

import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

# Before transformers is imported: no hub look-ups, ever.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import Dinov2Config, Dinov2Model  # noqa: E402

from hierconsole.errors import REASON_CHARS, InputError, bounded  # noqa: E402
from hierconsole.extraction.architectures import (  # noqa: E402
    Architecture,
    config_file,
    matching,
    same_network,
)
from hierconsole.extraction.weights import WeightsSource  # noqa: E402

_SHOWN = 5


@dataclass
class Backbone:
    model: Dinov2Model
    arch: Architecture
    weights: WeightsSource

    @property
    def dim(self) -> int:
        return self.arch.dim


POSITION_INTERPOLATION = (
    "bicubic resize of the 37x37 position embeddings by scale factor (16 + 0.1) / 37, as Meta's DINOv2 "
    "(interpolate_offset 0.1, no antialias)"
)


def build(arch: Architecture) -> Dinov2Model:
    return official_interpolation(Dinov2Model(Dinov2Config(**arch.config)).eval().requires_grad_(False))


def official_interpolation(model: Dinov2Model) -> Dinov2Model:
    """Resize the position embeddings to the input as Meta's DINOv2 does, not as `transformers` does.

    transformers resizes to an output size; Meta's code passes a scale factor with a 0.1 offset, which
    samples the grid at slightly different points. At 224 pixels the two give features about 0.5 %
    apart (measured on random weights against Meta's vision_transformer.py); the official models, and
    features extracted with them, use Meta's.
    """
    embeddings = model.embeddings

    def interpolate(embedded: torch.Tensor, height: int, width: int) -> torch.Tensor:
        pos = embeddings.position_embeddings
        n = pos.shape[1] - 1
        patch = embeddings.patch_embeddings.patch_size
        rows, cols = height // patch[0], width // patch[1]
        if embedded.shape[1] - 1 == n and rows == cols:
            return pos
        side = int(round(n**0.5))
        grid = pos[:, 1:].float().reshape(1, side, side, -1).permute(0, 3, 1, 2)
        grid = torch.nn.functional.interpolate(
            grid, scale_factor=((rows + 0.1) / side, (cols + 0.1) / side), mode="bicubic", antialias=False
        )
        if grid.shape[-2:] != (rows, cols):
            raise RuntimeError(f"position grid {tuple(grid.shape[-2:])} for {rows}x{cols} patches")
        grid = grid.permute(0, 2, 3, 1).reshape(1, rows * cols, -1)
        return torch.cat((pos[:, :1], grid.to(pos.dtype)), dim=1)

    embeddings.interpolate_pos_encoding = interpolate  # type: ignore[method-assign,assignment]
    return model


def load_backbone(arch: Architecture | None, source: WeightsSource, default: Architecture) -> Backbone:
    """The model with its weights; `arch` None means "the default, or what the weights folder says"."""
    if source.kind == "folder":
        assert source.path is not None
        from_folder = config_file(source.path / "config.json")
        if arch is not None and not same_network(arch.config, from_folder.config):
            raise InputError(
                source.path,
                f"the folder holds {matching(from_folder.config)}, not {arch.describe()}",
                hint="drop --model (the folder's config.json says which model it is) or pass the matching folder",
            )
        try:
            # with output_loading_info the call returns (model, info), which its annotation does not say
            loaded: Any = Dinov2Model.from_pretrained(
                str(source.path), local_files_only=True, output_loading_info=True
            )
            model, info = cast(tuple[Dinov2Model, dict], loaded)
        except (OSError, ValueError, RuntimeError) as exc:
            raise InputError(source.path, f"cannot load the model folder: {exc}") from exc
        # from_pretrained fills what the file lacks with random values; here that is an error.
        lacking = list(info.get("missing_keys", [])) + [str(k[0]) for k in info.get("mismatched_keys", [])]
        if lacking:
            raise InputError(
                source.path,
                f"the weights lack or misshape {len(lacking)} tensors of {from_folder.describe()}: "
                + ", ".join(sorted(lacking)[:_SHOWN]),
                hint="pass a complete DINOv2 model folder (without registers)",
            )
        return Backbone(official_interpolation(model.eval().requires_grad_(False)), from_folder, source)
    arch = arch or default
    if source.kind == "random":
        assert source.seed is not None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(source.seed)
            model = build(arch)
        return Backbone(model, arch, source)
    assert source.path is not None
    model = build(arch)
    state = hf_layout(read_state_dict(source.path, source.kind))
    check_matches(source.path, state, model, arch)
    model.load_state_dict(state, strict=True)
    return Backbone(model, arch, source)


def read_state_dict(path: Path, kind: str) -> dict[str, torch.Tensor]:
    try:
        if kind == "safetensors":
            from safetensors.torch import load_file

            obj: object = load_file(str(path))
        else:
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        # torch's own message advises weights_only=False, i.e. running the file's code: never repeated here.
        raise InputError(
            path,
            "the file holds Python objects beyond tensors, which are refused unread (loading them would run "
            "code from the file)",
            hint="save the weights as a plain state dict (torch.save(model.state_dict(), ...)) or .safetensors",
        ) from None
    except Exception as exc:  # each format raises its own types for a damaged or foreign file
        raise InputError(path, f"cannot read the weights: {bounded(str(exc), REASON_CHARS)}") from exc
    if isinstance(obj, dict):
        for key in ("state_dict", "model", "teacher"):  # training checkpoints wrap the weights
            if (
                key in obj
                and isinstance(obj[key], dict)
                and not isinstance(obj.get("cls_token"), torch.Tensor)
            ):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise InputError(path, "the file does not hold a state dict (a mapping of names to tensors)")
    return {str(k): v for k, v in obj.items()}


def hf_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a DINOv2 state dict to the current `transformers` Dinov2Model keys."""
    for prefix in ("module.", "backbone.", "teacher.backbone.", "dinov2.", "model."):
        if any(k.startswith(prefix) for k in state):
            # e.g. Dinov2ForImageClassification: the backbone under `dinov2.`, a head beside it
            state = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    if any(k.startswith("blocks.") for k in state) or "cls_token" in state:
        return _from_meta(state)
    out = {}
    for key, value in state.items():
        key = key.replace("attention.attention.query", "attention.q_proj")
        key = key.replace("attention.attention.key", "attention.k_proj")
        key = key.replace("attention.attention.value", "attention.v_proj")
        key = key.replace("attention.output.dense", "attention.o_proj")
        out[key] = value
    return out


_META = [
    (r"^cls_token$", "embeddings.cls_token"),
    (r"^mask_token$", "embeddings.mask_token"),
    (r"^pos_embed$", "embeddings.position_embeddings"),
    (r"^patch_embed\.proj\.", "embeddings.patch_embeddings.projection."),
    (r"^blocks\.(\d+)\.attn\.proj\.", r"encoder.layer.\1.attention.o_proj."),
    (r"^blocks\.(\d+)\.ls(\d)\.gamma$", r"encoder.layer.\1.layer_scale\2.lambda1"),
    (r"^blocks\.(\d+)\.", r"encoder.layer.\1."),
    (r"^norm\.", "layernorm."),
]


def _from_meta(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        fused = re.match(r"^blocks\.(\d+)\.attn\.qkv\.(weight|bias)$", key)
        if fused:
            layer, what = fused.groups()
            for name, part in zip(("q_proj", "k_proj", "v_proj"), value.chunk(3, dim=0), strict=True):
                out[f"encoder.layer.{layer}.attention.{name}.{what}"] = part.contiguous()
            continue
        for pattern, target in _META:
            if re.match(pattern, key):
                key = re.sub(pattern, target, key)
                break
        out[key] = value
    if "embeddings.mask_token" in out and out["embeddings.mask_token"].dim() == 1:
        out["embeddings.mask_token"] = out["embeddings.mask_token"][None]
    return out


def check_matches(path: Path, state: dict[str, torch.Tensor], model: Dinov2Model, arch: Architecture) -> None:
    expected = model.state_dict()
    given = _hyperparameters(state)
    if given and (given["hidden_size"], given["num_hidden_layers"]) != (arch.dim, arch.layers):
        raise InputError(
            path,
            f"the weights are {matching(given)}, but the model is {arch.describe()}",
            hint="pass the --model these weights belong to, or the weights of the model you asked for",
        )
    problems = []
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing:
        problems.append(
            f"{len(missing)} tensors missing: {', '.join(missing[:_SHOWN])}"
            + (" ..." if len(missing) > _SHOWN else "")
        )
    if unexpected:
        problems.append(
            f"{len(unexpected)} unexpected tensors: {', '.join(unexpected[:_SHOWN])}"
            + (" ..." if len(unexpected) > _SHOWN else "")
        )
    for key, value in state.items():
        if key in expected and tuple(value.shape) != tuple(expected[key].shape):
            problems.append(f"{key} has shape {tuple(value.shape)}, expected {tuple(expected[key].shape)}")
    if problems:
        raise InputError(
            path,
            [f"these are not the weights of {arch.describe()}", *problems[: _SHOWN + 2]],
            hint="pass the DINOv2 weights of the model you asked for (--model), without registers",
        )


def _hyperparameters(state: dict[str, torch.Tensor]) -> dict | None:
    cls = state.get("embeddings.cls_token")
    if cls is None:
        return None
    layers = {int(m.group(1)) for k in state if (m := re.match(r"^encoder\.layer\.(\d+)\.", k))}
    return {"hidden_size": int(cls.shape[-1]), "num_hidden_layers": len(layers)}
