"""Soak one orchestrator with many short jobs: its memory (RSS) and open file descriptors stay flat, and
the store grows in proportion to the events it ingests.

Many tiny studies (one seed, one epoch each, so a handful of short jobs apiece) are created and run in
waves through the same `Orchestrator` on the same open `Store`, as a long console session would; after
each wave the orchestrator's own process is sampled: RSS, open descriptors, the store file's size and
the events stored so far.

    .venv/bin/python benchmarks/soak.py [--jobs 200] [--wave 5] [--parallel 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hierconsole.datasets import make_synthetic
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store, db_path
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from tests.tiny import TINY, tiny_preset


@dataclass(frozen=True)
class Sample:
    jobs: int
    events: int
    rss_mib: float
    fds: int
    store_mib: float


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def store_bytes(home: Path) -> int:
    """The store file and its write-ahead log (DuckDB grows the file itself at checkpoints only)."""
    path = db_path(home)
    wal = path.with_name(path.name + ".wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def soak(home: Path, *, jobs: int, wave: int, parallel: int) -> list[Sample]:
    samples: list[Sample] = []
    with Store(home) as store:
        register_dataset(store, make_synthetic(TINY))
        orch = Orchestrator(store, max_parallel=parallel)
        preset = tiny_preset(epochs=1, seeds=[42])
        seed = 0
        while not samples or samples[-1].jobs < jobs:
            studies = []
            for _ in range(wave):
                seed += 1
                # A study per seed: every job differs, so none is served from an earlier one's results.
                studies.append(create_study(store, preset.with_overrides(seeds=[seed]), "tiny"))
            orch.run_until_idle(studies, interval=0.05)
            done = store.value("SELECT count(*) FROM jobs WHERE state = 'finished'")
            total = store.value("SELECT count(*) FROM jobs")
            assert done == total, f"{total - done} jobs did not finish"
            events = store.value("SELECT count(*) FROM events")
            samples.append(Sample(done, events, rss_mib(), open_fds(), store_bytes(home) / 2**20))
            s = samples[-1]
            print(f"  {s.jobs:4d} jobs  {s.events:6d} events  RSS {s.rss_mib:6.1f} MiB  fds {s.fds:3d}  "
                  f"store {s.store_mib:6.2f} MiB", flush=True)  # fmt: skip
        orch.shutdown(cancel=True)
        orch.close_executors()
    return samples


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--wave", type=int, default=5, help="studies created and run at a time")
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        samples = soak(Path(tmp) / "home", jobs=args.jobs, wave=args.wave, parallel=args.parallel)
        took = time.perf_counter() - began
    first, last = samples[0], samples[-1]
    # The first wave pays the imports and DuckDB's caches; growth is judged from there on.
    later = samples[1:] or samples
    per_event = slope([s.events for s in later], [s.store_mib * 2**20 for s in later])
    print(f"{last.jobs} jobs ({last.events} events) in {took:.0f} s, {last.jobs / took:.2f} jobs/s")
    print(f"RSS after the first wave {first.rss_mib:.1f} MiB, at the end {last.rss_mib:.1f} MiB "
          f"(max {max(s.rss_mib for s in later):.1f}); per 100 jobs after the first wave "
          f"{100 * slope([s.jobs for s in later], [s.rss_mib for s in later]):+.2f} MiB")  # fmt: skip
    print(f"open descriptors: first wave {first.fds}, end {last.fds}, max {max(s.fds for s in samples)}")
    print(f"store {last.store_mib:.2f} MiB; {per_event:.0f} bytes per event (least squares after the first wave)")


if __name__ == "__main__":
    main()
