"""Recovery, as a user waits for it: how long each failure takes to surface and to be recovered from.

    python benchmarks/recovery.py [--epochs 30]

Runs the tiny synthetic study (the test suite's) through real `hierconsole` processes on a temporary
home and times, end to end:
- disk full: from the moment the orchestrator can no longer grow a file (RLIMIT_FSIZE) to its exit,
  then the `resume` that finishes the study;
- Ctrl-C: from SIGINT to the command's exit, then `resume`;
- a second shell: `hierconsole runs` against a held store (it reads the live snapshot) next to the same
  command on a free store (the baseline);
- the live snapshot's cost to the holder: one publish (CHECKPOINT, copy, rename) of stores of growing
  size, and the interval the publisher then keeps (snapshots take <= 10 % of the writer's time).
"""

from __future__ import annotations

import argparse
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from hierconsole.datasets import SyntheticConfig, make_synthetic
from hierconsole.study.db import live
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store

TINY = SyntheticConfig(
    name="tiny", n_leaves=12, n_middles=6, n_highs=3, n_singleton_middles=2, n_train=260, n_test=160, dim=48
)
RUN = [
    "run", "demo", "--dataset", "tiny", "--seeds", "42",
    "--set", "training.hidden=32", "--set", "training.out_dim=8", "--set", "training.batch_size=32",
    "--set", "training.lr=1e-3", "--set", "evaluation.n_query=40", "--set", "compute.device='cpu'",
]  # fmt: skip


def cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hierconsole", "--home", str(home), *args]


def fresh_home(root: Path, name: str) -> Path:
    home = root / name
    with Store(home) as store:
        register_dataset(store, make_synthetic(TINY))
    return home


def epochs_logged(home: Path) -> int:
    logs = list(home.glob("studies/*/jobs/final-s42/events.jsonl"))
    return logs[0].read_text().count('"kind":"epoch"') if logs else 0


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t0


def interrupted(root: Path, name: str, epochs: int, fault) -> tuple[float, float]:
    """Start the study, let it log a few epochs, apply `fault` to the running `hierconsole run`; returns
    (seconds from the fault to the command's exit, seconds `resume` then takes to finish the study)."""
    home = fresh_home(root, name)
    proc = subprocess.Popen(cli(home, *RUN, "--epochs", str(epochs)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while epochs_logged(home) < 8:
        time.sleep(0.02)
    t0 = time.perf_counter()
    fault(proc)
    proc.wait(timeout=120)
    surfaced = time.perf_counter() - t0
    return surfaced, timed(cli(home, "resume"))


def disk_full(proc: subprocess.Popen) -> None:
    """No file of the orchestrator may grow past 4 KiB: its store cannot commit, as on a full disk."""
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (4096, 4096))


def ctrl_c(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)


def second_shell(root: Path) -> tuple[float, float]:
    home = fresh_home(root, "second-shell")
    free = min(timed(cli(home, "runs")) for _ in range(3))
    proc = subprocess.Popen(cli(home, *RUN, "--epochs", "100000"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while live.latest(home) is None:
            time.sleep(0.05)
        held = min(timed(cli(home, "runs")) for _ in range(3))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    return free, held


def publish_cost(root: Path, rows: int) -> tuple[float, float, float]:
    """One publish of a store holding `rows` event rows: (seconds, seconds of the logical-copy baseline
    COPY FROM DATABASE, store MiB)."""
    home = root / f"publish-{rows}"
    with Store(home) as store:
        store.execute(
            "INSERT INTO events SELECT 's/j' || (i % 50), 'epoch:' || i, 'epoch', "
            "'{\"kind\":\"epoch\",\"loss\":' || random() || '}', now()::TIMESTAMP FROM range(?) t(i)",
            [rows],
        )
    size = (home / "hierconsole.duckdb").stat().st_size / 2**20
    con = duckdb.connect(str(home / "hierconsole.duckdb"))
    publisher = live.Publisher(home, home / "hierconsole.duckdb")
    publisher.last = -1e9
    t0 = time.perf_counter()
    publisher.maybe_publish(con, changed=True)
    took = time.perf_counter() - t0
    t0 = time.perf_counter()
    con.execute(f"ATTACH '{home / 'logical.duckdb'}' AS logical")
    con.execute("COPY FROM DATABASE hierconsole TO logical")
    con.execute("DETACH logical")
    baseline = time.perf_counter() - t0
    con.close()
    return took, baseline, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        surfaced, resumed = interrupted(root, "disk-full", args.epochs, disk_full)
        print(f"disk full: exit {surfaced:.2f} s after the fault; resume to complete {resumed:.2f} s")
        surfaced, resumed = interrupted(root, "ctrl-c", args.epochs, ctrl_c)
        print(f"Ctrl-C:    exit {surfaced:.2f} s after SIGINT;    resume to complete {resumed:.2f} s")
        free, held = second_shell(root)
        print(f"second shell `runs`: {held:.2f} s on a held store (live snapshot) vs {free:.2f} s on a free one "
              f"(ratio {held / free:.2f})")
        print("live snapshot publish cost (CHECKPOINT + byte copy) vs a logical copy (COPY FROM DATABASE):")
        for rows in (10_000, 100_000, 1_000_000):
            took, baseline, size = publish_cost(root, rows)
            interval = max(live.REFRESH_SECONDS, took / live.MAX_SHARE)
            print(
                f"  {rows:>9,} event rows ({size:6.1f} MiB): {took * 1000:7.1f} ms vs {baseline * 1000:7.1f} ms "
                f"(x{baseline / took:.0f}); published every {interval:.1f} s"
            )


if __name__ == "__main__":
    main()
