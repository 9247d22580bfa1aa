"""Time `hierconsole doctor --repair`: a finished study whose only backup is its lock's copy (so the
evaluation, audits and phase come back from the event logs), the store deleted, the store rebuilt.

    .venv/bin/python benchmarks/recovery.py [--seeds 42,2024,3407] [--epochs 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hierconsole.datasets import make_synthetic
from hierconsole.study.db import backups
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN
from tests.tiny import TINY


def cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), *args], capture_output=True, text=True, env=env
    )
    if done.returncode not in (0, 1):
        raise SystemExit(done.stdout + done.stderr)
    return done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="42,2024,3407")
    parser.add_argument("--epochs", default="4")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        with Store(home) as store:
            register_dataset(store, make_synthetic(TINY))
        env = {**os.environ, backups.ENV_MINUTES: "0"}
        cli(home, *TINY_RUN, "--epochs", args.epochs, "--seeds", args.seeds, env=env)
        store_bytes = (home / "hierconsole.duckdb").stat().st_size
        (home / "hierconsole.duckdb").unlink()
        began = time.perf_counter()
        done = cli(home, "doctor", "--repair")
        took = time.perf_counter() - began
        assert "rebuilt" in done.stdout, done.stdout
        print(f"store {store_bytes / 2**20:.1f} MiB, seeds {args.seeds}, epochs {args.epochs}: "
              f"doctor --repair (rebuild + checks, one process) {took:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
