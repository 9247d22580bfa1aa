"""The local executor: each job's worker is a subprocess of the orchestrator, writing its folder in the home.

Started with Popen (the orchestrator never forks itself: DuckDB is not fork-safe) by module name, so the
orchestrator never imports the engine (nor torch). One worker per `--gpus` id, each seeing only its own
device. A CPU launch may be forked by a standby started ahead of it (`study.executors.standby`): the same
worker, its imports already done, and the orchestrator's child as a cold one is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from hierconsole.contract import layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.contract.liveness import pid_alive, process_start_time
from hierconsole.study.executors.priority import run_in_background
from hierconsole.study.executors.standby import ForkedWorker, Standbys, forks_available
from hierconsole.vocabulary import Executor

WORKER_MODULE = "hierconsole.engine.worker"
"""Started as `python -m WORKER_MODULE --home HOME SPEC`: the orchestrator never imports it."""
LOCAL_NODE = "local"


class LocalHandle:
    executor: Executor = Executor.LOCAL
    node: str = LOCAL_NODE

    def __init__(
        self,
        pid: int,
        pid_start: str | None,
        proc: subprocess.Popen[bytes] | ForkedWorker | None = None,
        gpu: str | None = None,
    ):
        self.pid = pid
        self.pid_start = pid_start
        self.proc = proc
        """Our child; None for a worker adopted from an earlier orchestrator."""
        self.gpu = gpu

    def pump(self) -> None:
        """The worker appends to the home's events.jsonl itself."""

    def running(self) -> bool:
        return self.proc.poll() is None if self.proc is not None else pid_alive(self.pid, self.pid_start)

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def exit_note(self) -> str | None:
        if self.proc is None:
            return None
        return f"worker exited with status {self.proc.returncode} without a final event; see worker.log"

    def release(self) -> None:
        """Nothing held beyond the process, which has ended."""

    def wait(self, timeout: float) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)


class LocalExecutor:
    kind: Executor = Executor.LOCAL

    def __init__(
        self, home: Path, *, python: str | None = None, gpus: list[str] | None = None, warm: bool = True
    ):
        self.home = home
        self.python = python or sys.executable
        # One worker per GPU: each sees only its own device through CUDA_VISIBLE_DEVICES.
        self.gpus = list(gpus or [])
        warm = warm and not self.gpus and forks_available()
        self.standbys = Standbys(self.python, WORKER_MODULE, home) if warm else None
        """Warm CPU workers (see `study.executors.standby`); None: every launch starts cold."""
        self._launch_env: dict[str, str] | None = None
        """The environment of the latest launch: the one a standby is started in."""

    def capacity(self, max_parallel: int | None) -> int:
        if self.gpus:
            return len(self.gpus)
        if max_parallel is not None:
            return max_parallel
        return 1

    def _env(self, spec: JobSpec) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", str(spec.threads))
        return env

    def defers(self, spec: JobSpec) -> bool:
        """True: leave this launch queued for now, as the standby that is to fork it is still importing
        (one is started for it if none runs). A cold start would import the same modules on the same cores."""
        if self.standbys is None:
            return False
        self._launch_env = self._env(spec)
        return self.standbys.importing(self._launch_env)

    def launch(self, job_id: str, folder: Path, spec: JobSpec, *, busy_gpus: set[str]) -> LocalHandle:
        spec_path = layout.spec_path(folder)
        env = self._env(spec)
        gpu = None
        proc: subprocess.Popen[bytes] | ForkedWorker | None = None
        if self.gpus:
            gpu = next(g for g in self.gpus if g not in busy_gpus)
            env["CUDA_VISIBLE_DEVICES"] = gpu
        elif self.standbys is not None:
            self._launch_env = dict(env)
            proc = self.standbys.take(env, spec_path)
        if proc is None:
            log_file = open(folder / layout.WORKER_LOG, "ab")  # noqa: SIM115 - handed to the child
            proc = subprocess.Popen(
                [self.python, "-m", WORKER_MODULE, "--home", str(self.home), str(spec_path)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal is the orchestrator's to handle
            )
            log_file.close()
        run_in_background(proc.pid)  # a forked worker too: its own session is a scheduling group of its own
        return LocalHandle(proc.pid, process_start_time(proc.pid), proc, gpu)

    def warm(self, coming: bool) -> None:
        """Have a standby ready for the next launch when one is `coming`, and none otherwise."""
        if self.standbys is None:
            return
        if coming and self._launch_env is not None:
            self.standbys.prepare(self._launch_env)
        else:
            self.standbys.close()

    def close(self) -> None:
        """Workers are separate processes: only an unused standby is ended here."""
        if self.standbys is not None:
            self.standbys.close()
