"""The node side of the Ray executor: one actor per job attempt, running the job's worker on its node.

The actor rebuilds the part of the home the job reads (its dataset, split files, the models it scores,
its own folder with the checkpoints of earlier attempts) in a scratch home on the node, from files the
orchestrator put in Ray's object store, and starts the very same worker process a local job gets:
`python -m hierconsole.engine.worker --home SCRATCH SPEC`, with the same thread count. The worker writes
its events and checkpoints there; `fetch` hands them to the orchestrator in numbered batches
(`contract.transfer`), the job folder's files at each checkpoint boundary. The last batch is kept until
the orchestrator acknowledges it, so an orchestrator that dies mid-transfer gets it again.

Imports neither torch nor the store: the actor process stays small, and the worker imports torch itself.
Ray is imported only inside methods (the actor runs where Ray runs), so this module is importable
without it.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from hierconsole import __version__
from hierconsole.contract import layout, transfer
from hierconsole.contract.jobspec import JobSpec
from hierconsole.locations import job_dir
from hierconsole.study.executors.local import WORKER_MODULE

SCRATCH_ENV = "HIERCONSOLE_RAY_SCRATCH"
"""Where a node keeps the scratch homes of its jobs (default: the system's temporary folder)."""
_PR_SET_PDEATHSIG = 1


def scratch_root() -> Path:
    return Path(os.environ.get(SCRATCH_ENV) or tempfile.gettempdir()) / "hierconsole-ray"


def _die_with_parent() -> None:
    """In the worker, before exec: be killed when the thread that started it ends, as it does when the
    Ray worker process dies (killed, or its node lost), so a worker never runs on unobserved."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class JobRunner:
    """One attempt of one job on a Ray node (wrapped by `ray.remote` on the orchestrator's side)."""

    def __init__(self, job_id: str, home_key: str, attempt: int):
        self.job_id = job_id
        self.home_key = home_key
        """Names the orchestrator's home (a hash of its path): scratch homes of two homes never mix."""
        self.attempt = attempt
        self.scratch: Path | None = None
        self.folder: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.lock = threading.Lock()
        self.exited = threading.Event()
        self.offset = 0
        self.log_offset = 0
        self.known: transfer.FileState = {}
        self.seq = 0
        self.pending: transfer.Batch | None = None
        self.delivered_end = False
        self.placed: dict[str, Any] = {}
        self.started = threading.Event()

    # -- start ----------------------------------------------------------------------------------------
    def start(self, version: str, spec_text: str, omp_threads: str, job_files: list, *bundles: list) -> dict[str, Any]:
        """Unpack the job's inputs in a scratch home and start its worker; returns where it runs."""
        import ray  # the actor runs inside Ray

        if version != __version__:
            raise RuntimeError(
                f"this Ray node runs hierconsole {__version__}, the orchestrator {version}: install the same "
                f"version on every node"
            )
        spec = JobSpec.from_dict(json.loads(spec_text), source=f"job {self.job_id}")
        root = scratch_root() / self.home_key
        name = self.job_id.replace("/", "__")
        # Attempts of this job that died with their Ray worker left their scratch homes: this one replaces them.
        if root.is_dir():
            for old in root.glob(f"{name}-a*"):
                shutil.rmtree(old, ignore_errors=True)
        self.scratch = root / f"{name}-a{self.attempt}"
        self.scratch.mkdir(parents=True)
        for bundle in bundles:
            transfer.unpack(self.scratch, bundle)
        self.folder = job_dir(self.scratch, self.job_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        transfer.unpack(self.folder, job_files)
        spec.write(layout.spec_path(self.folder))
        self.known = transfer.folder_state(self.folder)
        env = dict(os.environ)
        env["OMP_NUM_THREADS"] = omp_threads
        launched = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            # This thread starts the worker and lives exactly as long as it: the worker's parent-death
            # signal is tied to the thread that forked it.
            assert self.folder is not None and self.scratch is not None
            try:
                with open(self.folder / layout.WORKER_LOG, "ab") as log:
                    self.proc = subprocess.Popen(
                        [sys.executable, "-m", WORKER_MODULE, "--home", str(self.scratch),
                         str(layout.spec_path(self.folder))],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        env=env,
                        start_new_session=True,
                        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                    )  # fmt: skip
            except BaseException as exc:  # noqa: BLE001 - reported by start()
                failure.append(exc)
                launched.set()
                self.exited.set()
                return
            launched.set()
            self.returncode = self.proc.wait()
            self.exited.set()

        threading.Thread(target=run, name=f"hierconsole-job-{name}", daemon=True).start()
        launched.wait()
        if failure:
            raise RuntimeError(f"could not start the worker on {socket.gethostname()}: {failure[0]}")
        assert self.proc is not None
        context = ray.get_runtime_context()
        self.placed = {
            "node_id": context.get_node_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "worker_pid": self.proc.pid,
        }
        self.started.set()
        return self.placed

    def placement(self, timeout: float = 600.0) -> dict[str, Any]:
        """Where it runs (what `start` returned), for an orchestrator that re-attaches."""
        if not self.started.wait(timeout):
            raise RuntimeError(f"job {self.job_id} did not start on this Ray worker")
        return self.placed

    # -- transfer -------------------------------------------------------------------------------------
    def fetch(self, ack: int) -> transfer.Batch:
        """Everything new since batch `ack`; the unacknowledged last batch again if the orchestrator did
        not get it (`ack` is behind). A batch with seq 0 is a beat: nothing new."""
        with self.lock:
            if self.pending is not None and self.pending.seq > ack:
                return self.pending
            self.pending = None
            if self.folder is None or self.delivered_end:
                return transfer.Batch(0, heartbeat_age=None, ended=self.delivered_end, returncode=self.returncode)
            # Whether it ended is read first: what it wrote before exiting is then all on disk.
            ended = self.exited.is_set()
            lines = self._new_lines(ended)
            files: list[transfer.FileCopy] = []
            if ended or transfer.has_boundary(lines):
                files, self.known = transfer.changes(self.folder, self.known)
            log = self._new_log()
            batch = transfer.Batch(
                0,
                lines=lines,
                files=tuple(files),
                log=log,
                heartbeat_age=self._heartbeat_age(),
                ended=ended,
                returncode=self.returncode if ended else None,
            )
            if batch.empty:
                return batch
            self.seq += 1
            batch = transfer.Batch(
                self.seq, batch.lines, batch.files, batch.log, batch.heartbeat_age, batch.ended, batch.returncode
            )
            self.pending = batch
            self.delivered_end = ended
            return batch

    def _new_lines(self, ended: bool) -> bytes:
        assert self.folder is not None
        path = self.folder / layout.EVENTS
        if not path.exists():
            return b""
        with open(path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        # A line still being written waits for its newline; once the worker is gone, a torn last line
        # is sent as it is (the orchestrator's file then holds what a local worker's would).
        end = len(data) if ended else data.rfind(b"\n") + 1
        self.offset += end
        return data[:end]

    def _new_log(self) -> bytes:
        assert self.folder is not None
        path = self.folder / layout.WORKER_LOG
        if not path.exists():
            return b""
        with open(path, "rb") as fh:
            fh.seek(self.log_offset)
            data = fh.read()
        self.log_offset += len(data)
        return data

    def _heartbeat_age(self) -> float | None:
        assert self.folder is not None
        try:
            return max(0.0, time.time() - (self.folder / layout.HEARTBEAT).stat().st_mtime)
        except FileNotFoundError:
            return None

    # -- control --------------------------------------------------------------------------------------
    def signal(self, sig: int) -> None:
        """SIGTERM: the worker stops at its next batch, emitting `cancelled`; SIGKILL: at once."""
        if self.proc is not None and self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def close(self) -> None:
        """The orchestrator has everything: end the worker if it still runs, drop the scratch home, exit."""
        import ray

        self.signal(signal.SIGKILL)
        self.exited.wait(timeout=10)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.scratch.parent.rmdir()  # the home's folder on this node, once its last job is gone
        ray.actor.exit_actor()


def home_key(home: Path) -> str:
    """A short name for a home, the same for every orchestrator of that home on this machine."""
    return hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
