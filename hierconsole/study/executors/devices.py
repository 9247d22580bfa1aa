"""Is the compute a study asks for present? Checked before anything is created, in a probe process.

The orchestrator never imports torch (it takes seconds and the console must start at once), so the
question goes to `python -m hierconsole.engine.probe`, and only when a GPU is asked for: CPU studies
pay nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from hierconsole.errors import ConfigError, HierconsoleError

PROBE_MODULE = "hierconsole.engine.probe"


@dataclass(frozen=True)
class Devices:
    torch: str
    cuda_devices: int
    cuda_built: bool
    mps: bool


def probe(python: str | None = None) -> Devices:
    # The probe sees every device: workers are handed their --gpus id through CUDA_VISIBLE_DEVICES,
    # so ids name physical devices, and a restriction of this shell must not hide them here.
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    try:
        done = subprocess.run(
            [python or sys.executable, "-m", PROBE_MODULE],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HierconsoleError(f"could not ask torch which devices exist ({exc}); check the installation") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HierconsoleError(f"could not ask torch which devices exist: {tail}; check the torch installation")
    try:
        d = json.loads(done.stdout.strip().splitlines()[-1])
        return Devices(str(d["torch"]), int(d["cuda_devices"]), bool(d["cuda_built"]), bool(d["mps"]))
    except (IndexError, ValueError, KeyError, TypeError):
        raise HierconsoleError(
            f"could not read which devices torch sees (probe printed {done.stdout[-200:]!r}); check the installation"
        ) from None


def check_devices(device: str, gpus: list[str] | None, *, source: str, python: str | None = None) -> None:
    """Raise a ConfigError naming the option if `device` (compute.device) or `gpus` (--gpus ids) is not
    available here. `source` says where `device` came from (the option or the flag)."""
    wants_cuda = device == "cuda" or bool(gpus)
    if not wants_cuda and device != "mps":
        return
    found = probe(python)
    if device == "mps" and not found.mps:
        raise ConfigError(
            f"{source} = 'mps', but this machine's torch ({found.torch}) has no MPS device (Apple GPUs only); "
            f"use --device cpu or auto"
        )
    if not wants_cuda:
        return
    if found.cuda_devices == 0:
        why = "was built without CUDA" if not found.cuda_built else "sees no CUDA device"
        what = f"--gpus {','.join(gpus)}" if gpus else f"{source} = 'cuda'"
        # Only --gpus asked for CUDA: dropping it is the whole fix (and `resume` has no --device to name).
        fix = "--device cpu, no --gpus" if device == "cuda" else "drop --gpus"
        raise ConfigError(f"{what}, but this machine's torch ({found.torch}) {why}; run on the CPU ({fix})")
    for gpu in gpus or ():
        if gpu.isdigit() and int(gpu) >= found.cuda_devices:
            raise ConfigError(
                f"--gpus {','.join(gpus or [])}: there is no GPU {gpu}; this machine has "
                f"{found.cuda_devices} (ids 0-{found.cuda_devices - 1})"
            )
