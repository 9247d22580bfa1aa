"""`export mlflow` and shell completion, as a user waits for them: fresh CLI processes, wall time.

    python benchmarks/tracker_export.py [--repeat 3]

On the fixed store of the tests (a complete study: 3 seeds x 4 cells, 5 epochs, 3 Q/G perturbations):
the first export into a new SQLite tracking store (MLflow creates and migrates its tables), an export
into a store that holds an earlier one with nothing changed (every run found, nothing logged), and one
Tab press of completion (studies from the home, --set keys), beside `hierconsole --version` measured in
the same run. Medians of --repeat rounds, the variants interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def wall(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ, **(env or {})}, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from hierconsole.datasets import make_synthetic
    from tests.stores.fixed import COMPLETE, build_store
    from tests.tiny import TINY

    cli = [sys.executable, "-m", "hierconsole"]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        build_store(home, make_synthetic(TINY))
        kept = Path(tmp) / "kept.db"
        subprocess.run([*cli, "--home", str(home), "export", "mlflow", COMPLETE, "--tracking-uri", f"sqlite:///{kept}"],
                       check=True, capture_output=True)  # fmt: skip
        times: dict[str, list[float]] = {}
        for i in range(args.repeat):
            fresh = Path(tmp) / f"fresh-{i}.db"
            export = [*cli, "--home", str(home), "export", "mlflow", COMPLETE, "--tracking-uri"]
            times.setdefault("export, new tracking store", []).append(wall([*export, f"sqlite:///{fresh}"]))
            times.setdefault("export again, nothing changed", []).append(wall([*export, f"sqlite:///{kept}"]))
            for line in (f"hierconsole --home {home} effects demo-", "hierconsole run demo --set training.l"):
                env = {
                    "_ARGCOMPLETE": "1",
                    "_ARGCOMPLETE_STDOUT_FILENAME": str(Path(tmp) / "answer"),
                    "COMP_LINE": line,
                    "COMP_POINT": str(len(line)),
                }
                times.setdefault(f"completion: {line.split(' ', 3)[-1]}", []).append(wall(cli, env))
            times.setdefault("hierconsole --version", []).append(wall([*cli, "--version"]))
    for name, values in times.items():
        print(f"{name:<48} {statistics.median(values):7.2f} s")


if __name__ == "__main__":
    main()
