"""Every wait a command makes is bounded, and SIGTERM ends the command within seconds whatever it waits on:
one line, no traceback, and no process it started left behind. As the probe met it, Python's default
SIGTERM ended `run` where it stood (no message, its workers left running in sessions of their own), and
a Ray handshake with a port that never answers went on for minutes.

Each test stops a real CLI process while it waits on one thing: the store's lock (held by another
writer), a Ray address whose port accepts but never speaks, a worker that never reports (stopped with
SIGSTOP before it could), and a standby worker waiting for its hand-off. The bounds are subprocess
timeouts (hang guards), not timing assertions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from hierconsole.errors import TERMINATED_EXIT
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import RESUMABLE_STATES
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, one_line_error, wait_for
from tests.reliability.processes import alive, descendants, is_standby, is_worker

pytestmark = [
    pytest.mark.slow,  # the CLI and its workers in subprocesses
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc"),
]

LONG = ("--epochs", "80", "--seeds", "42")
STOP_BOUND = 60.0
"""Seconds a stopped command may take to end (a hang guard: the cancel grace is 10 s, the kill after it)."""


class Watched:
    """A CLI process and every process seen below it while it ran (workers run in sessions of their own,
    so they are found by parentage, not by process group)."""

    def __init__(self, argv: list[str]):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.seen: set[int] = set()

    def children(self) -> set[int]:
        now = descendants(self.proc.pid)
        self.seen |= now
        return now

    def workers(self, *, standby: bool) -> set[int]:
        return {pid for pid in self.children() if (is_standby(pid) if standby else is_worker(pid))}

    def stop(self, sig: int = signal.SIGTERM) -> tuple[str, str]:
        self.children()
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=STOP_BOUND)
        return out, err

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        for pid in alive(self.seen):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def watch() -> Iterator[type[Watched]]:
    made: list[Watched] = []

    class Tracked(Watched):
        def __init__(self, argv: list[str]):
            super().__init__(argv)
            made.append(self)

    yield Tracked
    for w in made:
        w.close()


def _terminated_cleanly(w: Watched, out: str, err: str) -> None:
    """Exit 143 with one line saying so, no traceback, and nothing it started still running."""
    assert w.proc.returncode == TERMINATED_EXIT, (w.proc.returncode, out, err)
    assert "Traceback" not in out + err, err
    assert "terminated (SIGTERM)" in out + err
    # Workers that got SIGKILL after the grace are reaped by whoever adopted them: a hang guard, not a timer.
    wait_for(lambda: not alive(w.seen), timeout=STOP_BOUND, what=f"processes {sorted(alive(w.seen))} to end")


def _job_states(home) -> set[str]:
    with Store(home, read_only=True) as store:
        return {s for (s,) in store.rows("SELECT state FROM jobs")}


# -- the store's lock ---------------------------------------------------------------------------------


def test_a_second_writer_is_refused_by_the_lock_and_sigterm_of_the_holder_frees_it(tiny_home, watch):
    holder = watch(cli_argv(tiny_home, *TINY_RUN, *LONG))
    wait_for(lambda: bool(holder.workers(standby=False)), timeout=120, what="the holder's first worker")
    # A second writer does not wait on the lock: it is refused at once, naming the holder.
    second = cli(tiny_home, *TINY_RUN, *LONG, timeout=STOP_BOUND)
    text = one_line_error(second)
    assert f"is in use by PID {holder.proc.pid}" in text and "Only one hierconsole can write" in text
    out, err = holder.stop(signal.SIGTERM)
    _terminated_cleanly(holder, out, err)
    assert "terminated (SIGTERM): cancelling jobs" in " ".join(out.split())
    # The lock went with it: a writer opens the store, and the jobs wait to be resumed.
    with Store(tiny_home) as store:
        states = {s for (s,) in store.rows("SELECT state FROM jobs")}
    assert states <= {*RESUMABLE_STATES, "queued", "finished"} and states & set(RESUMABLE_STATES), states


# -- worker start ---------------------------------------------------------------------------------------


def test_sigterm_while_a_worker_never_reports_ends_the_command_and_the_worker(tiny_home, watch):
    run = watch(cli_argv(tiny_home, *TINY_RUN, *LONG))
    frozen: set[int] = set()

    def freeze() -> bool:
        # Stopped as soon as it exists: it is still importing torch, so it never writes its start.
        for pid in run.workers(standby=False) - frozen:
            os.kill(pid, signal.SIGSTOP)
            frozen.add(pid)
        return bool(frozen)

    wait_for(freeze, timeout=120, what="a worker to start")
    time.sleep(1)  # the orchestrator is now waiting on a worker that says nothing
    out, err = run.stop(signal.SIGTERM)
    _terminated_cleanly(run, out, err)
    assert not alive(frozen)
    assert _job_states(tiny_home) & set(RESUMABLE_STATES)


# -- the standby hand-off ---------------------------------------------------------------------------------


def test_sigterm_while_a_standby_waits_for_its_hand_off_ends_the_standby(tiny_home, watch):
    run = watch(cli_argv(tiny_home, *TINY_RUN, *LONG, "--parallel", "1"))
    standbys: set[int] = set()

    def standby_waits() -> bool:
        standbys.update(run.workers(standby=True))
        return bool(standbys)

    wait_for(standby_waits, timeout=120, what="a standby worker")
    for pid in standbys:
        os.kill(pid, signal.SIGSTOP)  # a standby that would never answer its hand-off
    out, err = run.stop(signal.SIGTERM)
    _terminated_cleanly(run, out, err)
    assert not alive(standbys)


def test_sigkill_of_the_orchestrator_ends_its_waiting_standby(tiny_home, watch):
    """Nobody is left to end it: the standby sees its standard input close, and goes."""
    run = watch(cli_argv(tiny_home, *TINY_RUN, *LONG, "--parallel", "1"))
    standbys: set[int] = set()

    def standby_waits() -> bool:
        standbys.update(run.workers(standby=True))
        return bool(standbys)

    wait_for(standby_waits, timeout=120, what="a standby")
    workers = run.workers(standby=False)
    run.proc.kill()
    run.proc.communicate(timeout=STOP_BOUND)
    wait_for(lambda: not alive(standbys), timeout=STOP_BOUND, what="the standby to end")
    for pid in alive(workers):  # a running job's worker outlives it on purpose (adopted by the next)
        os.kill(pid, signal.SIGKILL)


# -- a Ray port that never speaks --------------------------------------------------------------------------

SILENT_SERVER = """
import socket, sys
s = socket.socket(); s.bind(("", 0)); s.listen(64)  # every interface: Ray dials the node's own address
print(s.getsockname()[1], flush=True)
held = []
while True:
    c, _ = s.accept(); held.append(c)  # accepted, and never a byte in answer
    print("accepted", flush=True)
"""


@pytest.fixture
def silent_port() -> Iterator[tuple[int, list[str]]]:
    """The port of a server that accepts and never answers, and the lines it prints (one per connection)."""
    server = subprocess.Popen([sys.executable, "-c", SILENT_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(line.strip() for line in server.stdout), daemon=True).start()
        yield port, lines
    finally:
        server.kill()
        server.communicate()


def test_a_port_that_accepts_but_never_speaks_ray_is_one_line_within_the_timeout(tiny_home, silent_port):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'hierconsole[ray]'); the handshake needs it")
    port, _ = silent_port
    # Past 5 s, when Ray's core would print its own "Failed to connect to GCS" line: the error stays one line.
    done = cli(tiny_home, *TINY_RUN, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
               "--ray-connect-timeout", "8", timeout=90)  # fmt: skip
    text = one_line_error(done)
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"--ray-address 127.0.0.1:{port}: the port accepts connections but no Ray cluster answered within 8 s" in text
    with Store(tiny_home, read_only=True) as store:
        assert store.value("SELECT count(*) FROM studies") == 0


def test_sigterm_during_a_ray_handshake_ends_the_command(tiny_home, silent_port, watch):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'hierconsole[ray]'); the handshake needs it")
    port, accepted = silent_port
    run = watch(cli_argv(tiny_home, *TINY_RUN, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                         "--ray-connect-timeout", "300"))  # fmt: skip
    # The reachability check's connection, then Ray's own: it is inside the handshake now.
    wait_for(lambda: len(accepted) >= 2, timeout=120, what="Ray to dial the silent port")
    out, err = run.stop(signal.SIGTERM)
    _terminated_cleanly(run, out, err)
    assert err.strip() == "terminated (SIGTERM)"
    with Store(tiny_home, read_only=True) as store:
        assert store.value("SELECT count(*) FROM studies") == 0
