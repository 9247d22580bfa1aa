"""The notebook API's costs on the fabricated fixed store (tests/stores/fixed.py: a complete study of three
seeds, 36 scored runs): `import hierconsole` and the first `open_home`, then each read in a warm process,
against the same table from the CLI (`effects --json`, `export metrics`), each a fresh process as a shell
runs it. Medians of 5, variants in rotation.

    .venv/bin/python benchmarks/notebook.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROUNDS = 5


def _subprocess(*argv: str) -> Callable[[], None]:
    def run() -> None:
        subprocess.run([sys.executable, *argv], check=True, capture_output=True)

    return run


def main() -> None:
    from hierconsole.datasets import make_synthetic
    from tests.stores.fixed import COMPLETE, build_store
    from tests.tiny import TINY

    home = Path(tempfile.mkdtemp()) / "home"
    build_store(home, make_synthetic(TINY))
    import hierconsole as hc

    nb = hc.open_home(home)
    cli = ["-m", "hierconsole", "--home", str(home)]
    variants: dict[str, Callable[[], object]] = {
        "python -c 'import hierconsole'": _subprocess("-c", "import hierconsole"),
        "python -c 'open_home(HOME).studies()'": _subprocess(
            "-c", f"import hierconsole as hc; hc.open_home({str(home)!r}).studies()"
        ),
        "home.studies()": nb.studies,
        "home.effects(STUDY)": lambda: nb.effects(COMPLETE),
        "home.metrics(STUDY)": lambda: nb.metrics(COMPLETE),
        "hierconsole effects STUDY --json": _subprocess(*cli, "effects", COMPLETE, "--json"),
        "hierconsole export metrics --study STUDY -o -": _subprocess(
            *cli, "export", "metrics", "--study", COMPLETE, "-o", "-", "--format", "json"
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, fn in variants.items():
            began = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - began)
    med = {name: statistics.median(t) for name, t in times.items()}
    width = max(map(len, med))
    for name, seconds in med.items():
        print(f"{name.ljust(width)}  {seconds * 1000:8.1f} ms")
    print(f"effects: CLI process / warm notebook read = {med['hierconsole effects STUDY --json'] / med['home.effects(STUDY)']:.1f}x")
    print(f"metrics: CLI process / warm notebook read = {med['hierconsole export metrics --study STUDY -o -'] / med['home.metrics(STUDY)']:.1f}x")


if __name__ == "__main__":
    main()
