"""Where the backbone's weights come from, checked and hashed before torch is loaded.

`none` builds the architecture with seeded random weights (tests and smoke runs: the features mean
nothing, and the manifest and the screen say so). Otherwise a local Hugging Face model folder, a
`.safetensors` file, or a torch state dict (`.pth`, `.pt`, `.bin`, read with weights_only). Nothing is
ever downloaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from hierconsole.errors import InputError

RANDOM = "none"
STATE_DICT_SUFFIXES = (".pth", ".pt", ".bin")
FOLDER_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_HINT = (
    "pass a local Hugging Face DINOv2 folder (e.g. a facebook/dinov2-base snapshot with config.json and "
    "model.safetensors), a .safetensors file or a .pth state dict; or --weights none --seed S for random weights"
)


@dataclass(frozen=True)
class WeightsSource:
    kind: str  # "random", "folder", "safetensors" or "state_dict"
    path: Path | None
    seed: int | None
    sha256: str | None

    def record(self) -> dict:
        return {
            "kind": self.kind,
            "path": str(self.path.resolve()) if self.path else None,
            "seed": self.seed,
            "sha256": self.sha256,
            "pretrained": self.kind != "random",
        }

    def describe(self) -> str:
        if self.kind == "random":
            return f"RANDOM weights (seed {self.seed}): for tests and smoke runs, not real features"
        return f"weights {self.path} (sha256 {str(self.sha256)[:12]})"


SEED_MAX = 2**64 - 1
"""The largest seed of random weights: torch's generator takes 64 bits (a negative seed would alias one
2**64 above it, so seeds start at 0)."""


def check_seed(seed: int) -> None:
    """Refuse a seed the random weights cannot be drawn from (`torch.manual_seed` overflows past 64 bits)."""
    if not 0 <= seed <= SEED_MAX:
        raise InputError("--seed", f"{seed} is out of range", hint=f"give a seed from 0 to {SEED_MAX} (2**64 - 1)")


def weights_kind(path: Path) -> str:
    """What a weights path is ("folder", "safetensors" or "state_dict"), read from its name and, for a
    folder, its files; nothing is loaded or hashed, so a command can check --weights before it starts."""
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(
                path, "the folder has no config.json, so it is not a Hugging Face model folder", hint=_HINT
            )
        if not _folder_weights(path):
            raise InputError(path, f"the folder holds none of {', '.join(FOLDER_WEIGHTS)}", hint=_HINT)
        return "folder"
    if not path.is_file():
        raise InputError(path, "the weights file does not exist", hint=_HINT)
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        return "safetensors"
    if suffix in STATE_DICT_SUFFIXES:
        return "state_dict"
    raise InputError(path, f"unknown weights format {suffix!r}", hint=_HINT)


def _folder_weights(path: Path) -> list[Path]:
    return [path / n for n in FOLDER_WEIGHTS if (path / n).is_file()]


def weights_source(weights: str, seed: int | None) -> WeightsSource:
    if weights == RANDOM:
        if seed is None:
            raise InputError(
                "--weights none", "random weights need a seed", hint="add --seed S (e.g. --seed 0)"
            )
        check_seed(seed)
        return WeightsSource("random", None, seed, None)
    if seed is not None:
        raise InputError("--seed", "a seed only applies to --weights none", hint="drop --seed")
    path = Path(weights)
    kind = weights_kind(path)
    if kind == "folder":
        return WeightsSource(kind, path, None, _sha256([path / "config.json", _folder_weights(path)[0]]))
    return WeightsSource(kind, path, None, _sha256([path]))


def _sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
