"""Recovery times.

- `hierconsole doctor --repair`: a finished study whose only backup is its lock's copy (so the
  evaluation, audits and phase come back from the event logs), the store deleted, the store rebuilt.
- A lost Ray node (with the ray extra): a study spread over a head and a second node (one CPU each, own
  temporary folders, tests/reliability/ray_nodes.py), the second node killed once a checkpoint of its job
  is home: how long until `run` has marked its jobs crashed and ended, and how long `resume` takes to
  finish the study on the head, against the same study uninterrupted on the cluster.

    .venv/bin/python benchmarks/recovery.py [--seeds 42,2024,3407] [--epochs 4] [--node-epochs 20]
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
from hierconsole.errors import HierconsoleError
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
    parser.add_argument("--epochs", default="4", help="epochs of the rebuilt study (0: skip it)")
    parser.add_argument("--node-epochs", default="20", help="epochs of the two-node study (0: skip it)")
    args = parser.parse_args()
    if args.epochs != "0":
        rebuilt_store(args.seeds, args.epochs)
    if args.node_epochs != "0":
        lost_node(args.node_epochs)


def rebuilt_store(seeds: str, epochs: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        with Store(home) as store:
            register_dataset(store, make_synthetic(TINY))
        env = {**os.environ, backups.ENV_MINUTES: "0"}
        cli(home, *TINY_RUN, "--epochs", epochs, "--seeds", seeds, env=env)
        store_bytes = (home / "hierconsole.duckdb").stat().st_size
        (home / "hierconsole.duckdb").unlink()
        began = time.perf_counter()
        done = cli(home, "doctor", "--repair")
        took = time.perf_counter() - began
        assert "rebuilt" in done.stdout, done.stdout
        print(f"store {store_bytes / 2**20:.1f} MiB, seeds {seeds}, epochs {epochs}: "
              f"doctor --repair (rebuild + checks, one process) {took:.2f} s")  # fmt: skip


def lost_node(epochs: str) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        print("two-node loss: skipped (Ray is not installed: pip install 'hierconsole[ray]')")
        return
    from tests.reliability.ray_nodes import two_nodes

    study = (*TINY_RUN, "--epochs", epochs, "--seeds", "42,2024", "--parallel", "2")
    with tempfile.TemporaryDirectory() as tmp, two_nodes() as cluster:
        assert cluster.head is not None and cluster.second is not None
        ray = ("--executor", "ray", "--ray-address", cluster.address)
        homes = []
        for name in ("whole", "lost"):
            home = Path(tmp) / name
            with Store(home) as store:
                register_dataset(store, make_synthetic(TINY))
            homes.append(home)
        began = time.perf_counter()
        cli(homes[0], *study, *ray, env=cluster.env)
        whole = time.perf_counter() - began

        home = homes[1]
        argv = [sys.executable, "-m", "hierconsole", "--home", str(home), *study, *ray]
        began = time.perf_counter()
        run = subprocess.Popen(argv, env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not (cluster.workers_on(cluster.second) and any(home.glob("studies/*/jobs/*/checkpoints/ckpt-*.pt"))):
            time.sleep(0.05)
        into = time.perf_counter() - began
        cluster.second.kill()
        killed = time.perf_counter()
        noticed = None
        while run.poll() is None:
            if noticed is None and crashed_jobs(home):
                noticed = time.perf_counter() - killed
            time.sleep(0.2)
        ended = time.perf_counter() - killed
        with Store(home, read_only=True) as store:
            crashed = store.value("SELECT count(*) FROM jobs WHERE state = 'crashed'")
        began = time.perf_counter()
        done = cli(home, "resume", *ray, env=cluster.env)
        resumed = time.perf_counter() - began
        assert done.returncode == 0, done.stdout + done.stderr
        print(f"two-node loss ({epochs} epochs, seeds 42,2024, 1 CPU per node): whole study on both nodes "
              f"{whole:.1f} s; node killed {into:.1f} s in; its job seen crashed (the live snapshot, ~2 s "
              f"apart) {noticed if noticed is not None else float('nan'):.1f} s after the kill; `run` ended "
              f"{ended:.1f} s after it ({crashed} crashed, the rest finished on the head); `resume` on "
              f"the head finished in {resumed:.1f} s")  # fmt: skip


def crashed_jobs(home: Path) -> int:
    """Crashed jobs as another shell sees them (the running orchestrator's live snapshot)."""
    try:
        with Store(home, read_only=True) as store:
            return int(store.value("SELECT count(*) FROM jobs WHERE state = 'crashed'"))
    except HierconsoleError:  # no snapshot published yet
        return 0


if __name__ == "__main__":
    main()
