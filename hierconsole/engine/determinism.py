"""Seeds, RNG state capture and content hashes: what makes a run a pure function of its inputs."""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass
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


CUBLAS_WORKSPACE_ENV = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_WORKSPACE = ":4096:8"
"""cuBLAS's documented setting for reproducible results (one of its two): a fixed workspace per stream."""
CUDA_DETERMINISM_ENV = "HIERCONSOLE_CUDA_DETERMINISM"
"""Diagnostics only: "warn" makes torch warn about, not refuse, an operation without a deterministic CUDA
kernel, so a first run on a new GPU stack names every such operation instead of stopping at the first.
The mode is recorded in the job's start event, and the fixed_thread_count audit fails a study whose
CUDA jobs did not run strict."""
STRICT, WARN = "strict", "warn"


@dataclass(frozen=True)
class DeviceSettings:
    """Where a job ran and the settings its determinism rests on; recorded in its start event."""

    device: str
    device_name: str
    deterministic: str | None
    """"strict" or "warn" on CUDA (torch.use_deterministic_algorithms); None on CPU, deterministic as is
    for a fixed thread count."""
    cublas_workspace: str | None
    float32_matmul: str
    torch_version: str
    cuda_version: str | None


def configure_device(device: torch.device) -> DeviceSettings:
    """Make a CUDA device deterministic before its first kernel; describe any device.

    On CUDA: deterministic algorithms (strict unless $HIERCONSOLE_CUDA_DETERMINISM=warn), cuBLAS's fixed
    workspace, full-precision float32 matmuls (no TF32) and no cuDNN autotuning. CPU and MPS are left as
    they are: this changes nothing on the CPU path.
    """
    if device.type == "cuda":
        mode = os.environ.get(CUDA_DETERMINISM_ENV, STRICT)
        if mode not in (STRICT, WARN):
            raise ValueError(f"${CUDA_DETERMINISM_ENV} is {mode!r}; use {STRICT!r} (the default) or {WARN!r}")
        # Read when cuBLAS creates its first handle, so it must be set before the first matmul; an
        # explicit value of the user's is kept (and recorded).
        os.environ.setdefault(CUBLAS_WORKSPACE_ENV, CUBLAS_WORKSPACE)
        torch.use_deterministic_algorithms(True, warn_only=mode == WARN)
        torch.backends.cudnn.benchmark = False
        torch.set_float32_matmul_precision("highest")
        index = device.index if device.index is not None else torch.cuda.current_device()
        return DeviceSettings(
            device=str(device),
            device_name=torch.cuda.get_device_name(index),
            deterministic=mode,
            cublas_workspace=os.environ.get(CUBLAS_WORKSPACE_ENV),
            float32_matmul=torch.get_float32_matmul_precision(),
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda,
        )
    return DeviceSettings(
        device=str(device),
        device_name=device.type,
        deterministic=None,
        cublas_workspace=None,
        float32_matmul=torch.get_float32_matmul_precision(),
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
    )
