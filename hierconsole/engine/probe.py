"""`python -m hierconsole.engine.probe`: which compute devices this machine's torch can use, as JSON.

The orchestrator never imports torch, so before it creates a study that asks for a GPU it asks a
short-lived process (this one) instead of finding out from three failed workers.
"""

from __future__ import annotations

import json
import sys


def probe() -> dict[str, object]:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return {
        "torch": torch.__version__,
        "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "cuda_built": torch.version.cuda is not None,
        "mps": bool(mps is not None and mps.is_available()),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(probe()) + "\n")
