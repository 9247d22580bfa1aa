"""A Ray cluster of two nodes on one machine: a head and a second node, each its own `ray start` with its
own temporary folder, CPU count and scratch folder for the jobs' homes, so nothing one node writes is
seen by the other (as on two machines without a shared filesystem). A node is lost by killing its
raylet and every process below it, as a machine that goes away would lose them."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hierconsole.study.executors.ray_node import SCRATCH_ENV
from tests.reliability.processes import PROC, alive, cmdline, descendants

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    temp_dir: Path
    scratch: Path

    def processes(self) -> set[int]:
        """The node's Ray processes (they name its temporary folder) and everything below them (its
        Ray workers, renamed `ray::...`, and the job workers those started)."""
        mine = {
            int(p.name)
            for p in PROC.iterdir()
            if p.name.isdigit() and f"{self.temp_dir}/" in cmdline(int(p.name))
        }
        for pid in list(mine):
            mine |= descendants(pid)
        return alive(mine)

    def kill(self) -> None:
        for pid in self.processes():
            os.kill(pid, signal.SIGKILL)


@dataclass
class TwoNodes:
    root: Path
    address: str = ""
    env: dict[str, str] = field(default_factory=dict)
    head: Node | None = None
    second: Node | None = None

    def node(self, name: str, *, head: bool) -> Node:
        node = Node(self.root / name, self.root / f"{name}-scratch")
        node.temp_dir.mkdir(parents=True)
        env = {**self.env, SCRATCH_ENV: str(node.scratch)}
        where = ["--head", "--port", self.address.rsplit(":", 1)[1], "--include-dashboard", "false"] if head \
            else ["--address", self.address]  # fmt: skip
        subprocess.run(
            [RAY, "start", *where, "--num-cpus", "1", "--temp-dir", str(node.temp_dir), "--disable-usage-stats"],
            env=env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        return node

    def workers_on(self, node: Node) -> set[int]:
        """The hierconsole job workers running on `node`."""
        return {pid for pid in node.processes() if "hierconsole.engine.worker" in cmdline(pid)}


@contextmanager
def two_nodes() -> Iterator[TwoNodes]:
    """Start the head and the second node (one CPU each); kill both, and remove their folders, at the end.
    The folders are short paths in the system's temporary folder: Ray's sockets live in them, and a Unix
    socket's path may not pass 107 bytes."""
    root = Path(tempfile.mkdtemp(prefix="hc-ray-"))
    cluster = TwoNodes(root, address=f"127.0.0.1:{_free_port()}")
    # A home of its own for the Ray processes and the drivers pointed at them: nothing of the user's Ray
    # set-up (~/.ray) is read, and the cluster runs without authentication as a test cluster may.
    (root / "ray-user").mkdir(parents=True)
    # Nor anything an earlier Ray instance of this test process left in its environment (a driver's
    # `ray.init` sets RAY_* variables, e.g. its auth token mode, that `ray start` would then obey).
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    cluster.env = {**inherited, "HOME": str(root / "ray-user"), "RAY_DISABLE_USAGE_STATS": "1"}
    try:
        cluster.head = cluster.node("head", head=True)
        cluster.second = cluster.node("second", head=False)
        yield cluster
    finally:
        for node in (cluster.second, cluster.head):
            if node is not None:
                node.kill()
        time.sleep(0.5)
        shutil.rmtree(root, ignore_errors=True)
