"""Warm workers: worker processes started before their job, so a launch pays no interpreter or torch start-up.

A standby is `python -m hierconsole.engine.worker --standby`: it imports the engine (about two seconds
of torch and geoopt on this class of machine) and then waits for one line on its standard input, the
path of the spec it is to run. From then on it is an ordinary worker of that one job (same code, same
lock, events and exit statuses), and ends with it: processes are not reused across jobs, so no job can
see state another left behind. A standby that is never handed a job is ended by the orchestrator when no
launch is to come, or ends by itself when its standard input closes, as it does when the orchestrator dies.

Standbys are kept for CPU launches only: a GPU worker's device is fixed by its environment at start, and
its start-up is dwarfed by the job.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

from hierconsole.study.executors.priority import run_in_background

STANDBY_FLAG = "--standby"
CLOSE_WAIT_SECONDS = 5.0


class Standbys:
    """At most one warm worker, started in the environment of the latest launch and handed the next launch
    only if that launch's environment is exactly the same (an environment variable read at start, such as
    OMP_NUM_THREADS or a fault-injection switch, must not differ between a warm and a cold worker)."""

    def __init__(self, python: str, module: str, home: Path):
        self.python = python
        self.module = module
        self.home = home
        self._env: dict[str, str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
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
            stdout=subprocess.DEVNULL,  # until it has a job: then its worker log (see the worker)
            stderr=subprocess.DEVNULL,
            env=self._env,
            start_new_session=True,  # as a cold worker: a Ctrl-C in the terminal is the orchestrator's
        )
        run_in_background(self._proc.pid)

    def take(self, env: dict[str, str], spec_path: Path) -> subprocess.Popen[bytes] | None:
        """Hand `spec_path` to the standby and return it, or None (the caller starts a worker cold): none
        ready, it died, or it was started in another environment."""
        proc, same = self._proc, self._env == env
        if proc is None or not same or proc.poll() is not None or proc.stdin is None:
            self.close()
            return None
        self._proc, self._env = None, None
        try:
            proc.stdin.write(f"{spec_path}\n".encode())
            proc.stdin.close()
        except OSError:  # it died between the poll and the write
            _end(proc)
            return None
        self.handed += 1
        return proc

    def close(self) -> None:
        """End the unused standby, if any, and reap it. It holds no job, so SIGTERM (whose default action
        ends it at once, even mid-import) loses nothing."""
        proc, self._proc, self._env = self._proc, None, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        _end(proc)

    @property
    def pid(self) -> int | None:
        """The waiting standby's process id (None: none waits)."""
        return None if self._proc is None or self._proc.poll() is not None else self._proc.pid


def _end(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=CLOSE_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, 9)
        proc.wait()
