"""Start-up of the light paths, as a user waits for them: fresh interpreters, wall time, best of N.

    python benchmarks/startup.py [--repeat 5]

Measures `hierconsole --version`, `--help`, `runs` and `studies` on an empty home, and the console's first
painted frame (Textual's headless driver), each in a new process. The baseline, measured in the same run,
is what every one of them paid before the light paths were kept free of the engine: importing torch and
geoopt (`python -c "import torch, geoopt"`). The breakdown lists the heaviest top-level imports of
`--version` from `python -X importtime`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

CONSOLE = """
import asyncio, sys
from hierconsole.study.db.storage import Store
from hierconsole.tui.app import HierConsole

async def main():
    with Store(sys.argv[1]) as store:
        app = HierConsole(store, orchestrate=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()

asyncio.run(main())
"""


def wall(argv: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "TERM": "dumb"})
        best = min(best, time.perf_counter() - t0)
    return best


def heaviest_imports(n: int = 6) -> list[tuple[float, str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hierconsole", "--version"], capture_output=True, text=True
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if cumulative.isdigit() and not name.startswith(" ") and "." not in name.strip():
            rows.append((int(cumulative) / 1e6, name.strip()))
    return sorted(rows, reverse=True)[:n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="hc-startup-") as home:
        baseline = wall([py, "-c", "import torch, geoopt"], args.repeat)
        cases = {
            "hierconsole --version": [py, "-m", "hierconsole", "--version"],
            "hierconsole --help": [py, "-m", "hierconsole", "--help"],
            "hierconsole runs (empty home)": [py, "-m", "hierconsole", "--home", home, "runs"],
            "hierconsole studies (empty home)": [py, "-m", "hierconsole", "--home", home, "studies"],
            "console, first frame (empty home)": [py, "-c", CONSOLE, home],
        }
        print(f"# startup  {time.strftime('%Y-%m-%d %H:%M')}  best of {args.repeat}, fresh interpreters")
        print(f"  baseline: import torch, geoopt  {baseline:6.2f} s  (what each light path paid before)")
        for name, argv in cases.items():
            seconds = wall(argv, args.repeat)
            print(f"  {name:36s} {seconds:6.2f} s   {baseline / seconds:5.1f}x faster than the baseline")
    print("  heaviest imports of --version (cumulative s):")
    for seconds, name in heaviest_imports():
        print(f"    {name:20s} {seconds:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
