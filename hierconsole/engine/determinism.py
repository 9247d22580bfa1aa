"""Seeds, RNG state capture and content hashes: what makes a run a pure function of its inputs."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import numpy as np
import torch


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts, stable across processes and Python versions (unlike hash())."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def reset_all_rngs(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)


def state_sha256(module: torch.nn.Module, *, trainable_only: bool = True) -> str:
    """Hash of a module's (trainable) parameters in name order: equal iff bit-identical."""
    h = hashlib.sha256()
    for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
        if trainable_only and not p.requires_grad:
            continue
        h.update(name.encode())
        h.update(p.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def capture_global_rngs() -> dict[str, Any]:
    """Every global RNG as tensors and ints, so a checkpoint loads with weights_only=True."""
    py_state = random.getstate()
    # legacy=True is the default, spelt out for numpy's stub, whose overloads take a bare call for False.
    np_state = np.random.get_state(legacy=True)
    assert isinstance(np_state, tuple)  # legacy=True gives the tuple or raises (the global one is MT19937)
    out: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python_version": int(py_state[0]),
        "python_state": torch.tensor(py_state[1], dtype=torch.int64),
        "python_gauss": py_state[2] if py_state[2] is None else float(py_state[2]),
        "numpy_keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
        "numpy_pos": int(np_state[2]),
        "numpy_has_gauss": int(np_state[3]),
        "numpy_gauss": float(np_state[4]),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def restore_global_rngs(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(
        (
            state["python_version"],
            tuple(int(x) for x in state["python_state"].tolist()),
            state["python_gauss"],
        )
    )
    np.random.set_state(
        (
            "MT19937",
            state["numpy_keys"].numpy().astype(np.uint32),
            state["numpy_pos"],
            state["numpy_has_gauss"],
            state["numpy_gauss"],
        )
    )
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
