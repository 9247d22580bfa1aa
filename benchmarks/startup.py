"""Start-up of the light paths, as a user waits for them: fresh interpreters, wall time, best of N.

    python benchmarks/startup.py [--repeat 5]

Measures `hierconsole --version`, `--help`, `runs` and `studies` on an empty home, each in a new process,
and the console's first frame as a user waits for it: `hierconsole --home HOME` in an 80x24
pseudo-terminal, from the start of the process to the first output holding the view tabs, on a home with
no store yet (median; `read_latency.first_frame_pty`, which also times it on an empty store and a full
home). It was timed until 2026-12-06 in Textual's headless test harness on an opened store, a path no
user takes. The baseline, measured in the same run,
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from read_latency import first_frame_pty  # noqa: E402


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
        }
        print(f"# startup  {time.strftime('%Y-%m-%d %H:%M')}  best of {args.repeat}, fresh interpreters")
        print(f"  baseline: import torch, geoopt  {baseline:6.2f} s  (what each light path paid before)")
        for name, argv in cases.items():
            seconds = wall(argv, args.repeat)
            print(f"  {name:36s} {seconds:6.2f} s   {baseline / seconds:5.1f}x faster than the baseline")
        fresh = (Path(home) / f"console-{n}" for n in range(args.repeat))
        seconds = first_frame_pty(lambda: next(fresh), args.repeat)
        name = "console, first frame (no store yet)"
        print(f"  {name:36s} {seconds:6.2f} s   {baseline / seconds:5.1f}x faster than the baseline (median, pty)")
    print("  heaviest imports of --version (cumulative s):")
    for seconds, name in heaviest_imports():
        print(f"    {name:20s} {seconds:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
