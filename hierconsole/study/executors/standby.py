"""Warm workers: a standby imports the engine once and forks each CPU launch's worker, so a launch pays no
interpreter or torch start-up.

A standby is `python -m hierconsole.engine.worker --standby`: it imports the engine (about three seconds
of torch and geoopt on this class of machine), says it is ready, and then forks a worker for each spec path
it is handed on its standard input. A forked worker is an ordinary worker of its one job (same code, same
lock, events, worker log and exit statuses) in a fresh process that holds nothing but the imports: no job
sees state another left behind. It is handed to the orchestrator as its own child (it asks the kernel to
adopt the orphan its standby's intermediate leaves, for the hand-off only), so it is watched, signalled
and reaped as a cold worker is, and runs on if the orchestrator dies. The standby is ended by the
orchestrator when no launch is to come, or ends by itself when its standard input closes, as it does when
the orchestrator dies.

Standbys are kept for CPU launches on Linux (adopting orphans is Linux's `PR_SET_CHILD_SUBREAPER`); a GPU
worker's device is fixed by its environment at start, and its start-up is dwarfed by the job. Elsewhere
every launch starts cold.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from hierconsole.contract.standby import READY, STANDBY_FLAG
from hierconsole.study.executors.priority import run_in_background

CLOSE_WAIT_SECONDS = 5.0
READY_WAIT_SECONDS = 30.0
"""How long launches wait for a standby to finish its imports (seconds, on a loaded machine) before they are
started cold instead and the standby is ended (a standby that cannot import, or is stopped, is not waited for)."""
HANDOFF_SECONDS = 10.0
"""How long a hand-off may take (a fork: milliseconds) before the standby is judged stuck, ended, and the
launch started cold."""

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg: int | ctypes.c_int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(option, arg, 0, 0, 0) == 0)


def forks_available() -> bool:
    """True where a standby's forks can be handed to the orchestrator (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        state = ctypes.c_int(0)
        return _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.pointer(state))  # type: ignore[arg-type]
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def _adopting_orphans() -> Iterator[None]:
    """This process adopts orphaned descendants while the block runs (then as before): a forked worker,
    orphaned when its standby's intermediate exits, becomes our child."""
    before = ctypes.c_int(0)
    _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.pointer(before))  # type: ignore[arg-type]
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield
    finally:
        _prctl(_PR_SET_CHILD_SUBREAPER, before.value)


class ForkedWorker:
    """A worker a standby forked, once it is our child: the part of `subprocess.Popen` an executor uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost, and it ran no further
                self.returncode = -1
            else:
                if done:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.02)
        return code


class Standbys:
    """At most one standby, started in the environment of the latest launch and used for a launch only if
    that launch's environment is exactly the same (an environment variable read at start, such as
    OMP_NUM_THREADS or a fault-injection switch, must not differ between a warm and a cold worker)."""

    def __init__(self, python: str, module: str, home: Path):
        self.python = python
        self.module = module
        self.home = home
        self._env: dict[str, str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._started = 0.0
        self._answers = b""
        self.handed = 0
        """Launches served warm so far."""

    def prepare(self, env: dict[str, str]) -> None:
        """Have a standby for launches in `env` (one ready, or still importing); replace one for another env."""
        if self._proc is not None and self._proc.poll() is None and self._env == env:
            return
        self.close()
        self._env = dict(env)
        self._proc = subprocess.Popen(
            [self.python, "-m", self.module, "--home", str(self.home), STANDBY_FLAG],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,  # its answers: `ready`, then one PID per hand-off
            stderr=subprocess.DEVNULL,
            env=self._env,
            start_new_session=True,  # as a cold worker: a Ctrl-C in the terminal is the orchestrator's
        )
        self._started = time.monotonic()
        run_in_background(self._proc.pid)

    def importing(self, env: dict[str, str]) -> bool:
        """Should a launch in `env` wait for the standby? True while one for `env` (started now if there is
        none) is still importing: it will fork the launch within seconds, where a cold worker would spend
        those seconds importing the same modules on the same cores. False once it is ready, and where it
        died or took longer than READY_WAIT_SECONDS (ended then: the launch starts cold)."""
        self.prepare(env)
        proc = self._proc
        if self._ready or proc is None:
            return False
        line = self._line(proc, timeout=0.0)
        if line == READY:
            self._ready = True
            return False
        if (
            line is not None
            or proc.poll() is not None
            or time.monotonic() - self._started > READY_WAIT_SECONDS
        ):
            self.close()
            return False
        return True

    def take(self, env: dict[str, str], spec_path: Path) -> ForkedWorker | None:
        """Have the standby fork the worker of `spec_path` and return it, or None (the caller starts a worker
        cold): none ready as :meth:`importing` last found it (one still importing stays for the next
        launch), it died or is stuck, or it was started in another environment."""
        proc = self._proc
        if proc is None or self._env != env or proc.poll() is not None or proc.stdin is None:
            self.close()
            return None
        if not self._ready:
            return None
        with _adopting_orphans():
            try:
                proc.stdin.write(os.fsencode(spec_path) + b"\n")
                proc.stdin.flush()
            except OSError:  # it died between the poll and the write
                self.close()
                return None
            answer = self._line(proc, timeout=HANDOFF_SECONDS)
        if answer is None or not answer.isdigit():  # stuck, gone, or the fork failed
            self.close()
            return None
        self.handed += 1
        return ForkedWorker(int(answer))

    def _line(self, proc: subprocess.Popen[bytes], timeout: float) -> bytes | None:
        """The standby's next answer line, waiting up to `timeout` seconds for it (None: none came, or its
        output ended)."""
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._answers:
            left = max(0.0, deadline - time.monotonic())
            if not select.select([proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                return None
            self._answers += chunk
        line, _, self._answers = self._answers.partition(b"\n")
        return line.strip()

    def close(self) -> None:
        """End the standby, if any, and reap it. It holds no job (its workers are ours), so SIGTERM (whose
        default action ends it at once, even mid-import) loses nothing."""
        proc, self._proc, self._env = self._proc, None, None
        self._ready, self._answers = False, b""
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        _end(proc)

    @property
    def pid(self) -> int | None:
        """The standby's process id (None: none runs)."""
        return None if self._proc is None or self._proc.poll() is not None else self._proc.pid


def _end(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=CLOSE_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, 9)
        proc.wait()
