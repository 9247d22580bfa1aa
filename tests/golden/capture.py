"""Write the three-level golden files (tests/golden/k3) from the current code: ONLY on purpose.

The goldens hold K = 3 results bit for bit while the level code is generalised (issue 41); rewriting them
accepts whatever the code computes now. Run from the repository root:

    python -m tests.golden.capture     (or: python tests/golden/capture.py)

It clears k3/ and runs tests/test_k3_bit_identity.py (slow tests included) in this process with
HIERCONSOLE_WRITE_GOLDEN=1, so the files are written by the very code that later compares them.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a file: make `tests` importable
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from tests.golden.store import K3, WRITE_ENV  # noqa: E402

MODULE = ROOT / "tests" / "test_k3_bit_identity.py"


def main() -> int:
    if K3.exists():
        shutil.rmtree(K3)
    K3.mkdir(parents=True)
    os.environ[WRITE_ENV] = "1"
    # Subprocesses (the CLI) inherit the environment; they import hierconsole from this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    code = int(pytest.main([str(MODULE), "-n", "0", "-q", "-p", "no:cacheprovider", "-m", ""]))
    total = sum(p.stat().st_size for p in K3.rglob("*") if p.is_file())
    print(f"wrote {sum(1 for p in K3.rglob('*') if p.is_file())} golden files ({total:,} bytes) to {K3}")
    return code


if __name__ == "__main__":
    sys.exit(main())
