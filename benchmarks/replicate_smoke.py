"""What `replicate` does today, timed: hashing a generated CUB-layout folder (the stages' input keys) and
the `replicate --dry-run` command end to end, on this machine.

    .venv/bin/python benchmarks/replicate_smoke.py [--images 2000] [--kib 20]

Running the stages themselves is not wired into `replicate` yet, so there is no per-stage pipeline time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hierconsole.study.run.input_hashes import folder_sha256


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--kib", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cub = Path(tmp) / "CUB_200_2011"
        for i in range(args.images):
            folder = cub / "images" / f"{i % 200:03d}.class"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i}.jpg").write_bytes(os.urandom(args.kib * 1024))
        (cub / "classes.txt").write_text("".join(f"{c + 1} {c:03d}.class\n" for c in range(200)))
        started = time.perf_counter()
        folder_sha256(cub / "images")
        hashed = time.perf_counter() - started
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "hierconsole",
                "--home",
                f"{tmp}/home",
                "replicate",
                "--cub",
                str(cub),
                "--weights",
                "none",
                "--scale",
                "smoke",
                "--dry-run",
            ],
            check=True,
            capture_output=True,
        )
        dry = time.perf_counter() - started
    print(f"{args.images} images x {args.kib} KiB: folder hash {hashed:.2f}s; replicate --dry-run {dry:.2f}s")


if __name__ == "__main__":
    main()
