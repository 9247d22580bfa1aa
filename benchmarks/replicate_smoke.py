"""`replicate --scale smoke` timed end to end as a user waits, on generated CUB- and NABirds-layout folders
(images made here, a tiny random-weight backbone), with the per-stage breakdown from the store, against
the naive baseline measured in the same run: the same stages' commands typed one after another by hand
(each stage's logged commands replayed in a fresh home), and the re-run with nothing to do. Before the run,
`replicate --dry-run` in the same home measures and stores this machine's calibration; its estimate of the
whole pipeline and of each stage is printed against the measured times (the issue's target: within 30 %).

    .venv/bin/python benchmarks/replicate_smoke.py [--datasets cub,nabirds]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the layouts the tests use

from hierconsole.study.db.calibrations import calibration, replication_work  # noqa: E402
from hierconsole.study.db.storage import Store  # noqa: E402
from hierconsole.study.replication.estimate import replication_estimate  # noqa: E402
from hierconsole.study.replication.runner import load_records  # noqa: E402
from tests.stores.layouts import make_cub, make_nabirds, tiny_model  # noqa: E402


def _replicate(home: Path, base: Path, datasets: list[str], *extra: str) -> float:
    argv = [sys.executable, "-m", "hierconsole", "--home", str(home), "replicate", *extra]
    if "cub" in datasets:
        argv += ["--cub", str(base / "CUB_200_2011"), "--checklist", str(base / "checklist.csv")]
    if "nabirds" in datasets:
        argv += ["--nabirds", str(base / "nabirds")]
    argv += ["--weights", "none", "--model", str(base / "tiny-dinov2.json"), "--scale", "smoke"]
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def _by_hand(home: Path, replica: Path) -> float:
    """Every command the stages ran, from their logs, one after another in a fresh home."""
    commands = []
    for log in sorted((replica / "logs").glob("*.log"), key=lambda p: p.stat().st_mtime):
        commands += [line[len("$ hierconsole ") :] for line in log.read_text().splitlines() if line.startswith("$ hierconsole ")]
    started = time.perf_counter()
    for command in commands:
        argv = [a.replace(str(replica.parents[1]), str(home)) for a in shlex.split(command)]
        subprocess.run([sys.executable, "-m", "hierconsole", "--home", str(home), *argv], capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", default="cub,nabirds")
    datasets = parser.parse_args().datasets.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        make_cub(base)
        make_nabirds(base, supergroups=3, parents=6, leaves=2, per_class=6)
        tiny_model(base)
        home = base / "home"
        calibrating = _replicate(home, base, datasets, "--dry-run")  # measures and stores the calibration
        dry = _replicate(home, base, datasets, "--dry-run")  # reuses it
        with Store(home, read_only=True) as store:
            (rid,) = (r for (r,) in store.rows("SELECT replication_id FROM replication_work"))
            guess = replication_estimate(store, rid)
            recorded = replication_work(store, rid)
            units = calibration(store, recorded[0]) if recorded else None
        assert guess is not None
        load_before = os.getloadavg()[0]
        whole = _replicate(home, base, datasets)
        again = _replicate(home, base, datasets)
        (replica,) = (home / "replications").iterdir()
        with Store(home, read_only=True) as store:
            records = load_records(store, replica.name)
        # The hand-typed baseline writes its files where the stages did, inside its own home.
        hand_home = base / "by-hand"
        (hand_home / "replications" / replica.name / "features").mkdir(parents=True)
        (hand_home / "replications" / replica.name / "taxonomy").mkdir(parents=True)
        hand = _by_hand(hand_home, replica)
    load = os.getloadavg()[0]
    print(
        f"replicate --scale smoke ({'+'.join(datasets)}), load average {load_before:.1f} before the run and "
        f"{load:.1f} after, on {os.cpu_count()} CPUs"
    )
    print(f"  dry run: {calibrating:.1f} s measuring the calibration, {dry:.1f} s reusing it")
    if units is not None:
        u = units["units"]
        print(
            f"  calibration: command start {u['command_start']:.2f} s, worker start {u['worker_start']:.2f} s, "
            f"{u['cell_update'] * 1e3:.3f} ms per cell-update, {u['comparison'] * 1e6:.2f} us per pair, "
            f"{u['image'] * 1e3:.1f} ms per image, backbone {u['backbone']:.2f} s"
        )
    print(f"  whole pipeline          {whole:7.1f} s   dry-run estimate {guess.total:7.1f} s   "
          f"estimate / measured = {guess.total / whole:.2f}")
    estimated = {s.stage: s.seconds for s in guess.stages}
    for name, record in sorted(records.items(), key=lambda kv: -(kv[1].seconds or 0)):
        took = record.seconds or 0
        print(f"    {name:<20} {took:7.1f} s   estimate {estimated.get(name, 0):7.1f} s")
    print(f"  the same commands by hand {hand:5.1f} s  (replicate / by hand = {whole / hand:.2f}x)")
    print(f"  re-run, nothing to do   {again:7.1f} s")


if __name__ == "__main__":
    main()
