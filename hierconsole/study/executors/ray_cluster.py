"""The orchestrator side of the Ray executor: each job attempt is a Ray actor (`ray_node.JobRunner`).

An actor asks for the job's resources (`num_cpus` = the worker's threads, one GPU for a cuda job) and is
detached and named after the home and the job, so it outlives the orchestrator that launched it: the
next orchestrator on the same cluster finds it by the name in the job folder's `executor.json` and
re-attaches. The job's inputs go to the node through Ray's object store (put once per orchestrator and
file version, so the seeds of a study share one copy of the dataset); its events and files come back in
batches that `RayHandle.pump` writes into the job folder in the home: files first, then the event
lines, then the acknowledgement in `executor.json`. A shared filesystem is never needed.

Ray is imported here only, when `--executor ray` is chosen (or a Ray job is found running): the console
and the light commands never load it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from hierconsole import __version__
from hierconsole.contract import layout, transfer
from hierconsole.contract.durable import HASH_SIDECAR, sidecar, write_atomically
from hierconsole.contract.jobspec import JobSpec
from hierconsole.contract.liveness import pid_alive, process_start_time
from hierconsole.errors import ConfigError, HierconsoleError
from hierconsole.study.executors import LOCAL_RAY, RAY_CONNECT_TIMEOUT, RAY_INSTALL, check_reachable
from hierconsole.study.executors.ray_node import JobRunner, home_key
from hierconsole.vocabulary import Executor

NAMESPACE = "hierconsole"
CAPACITY_SECONDS = 30.0
"""How long the cluster's CPU count is trusted before it is asked again (an autoscaler changes it)."""
PENDING_NODE = "(waiting)"
"""The node of a Ray job that waits for Ray to place it (for the resources it asks for)."""

log = logging.getLogger("hierconsole.ray")


def import_ray() -> Any:
    """The `ray` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"--executor ray needs Ray, which cannot be imported here ({exc}); install it: {RAY_INSTALL}") from None
    return ray


def _init_within(ray: Any, options: dict[str, Any], timeout: float, deadline: float) -> None:
    """`ray.init(**options)` given up at `deadline` (`timeout` seconds after the connect began) with one line. A port that accepts a
    connection but never speaks Ray's protocol (another service, a half-started head, a firewall that
    swallows packets) keeps Ray's own handshake retrying for minutes; the call runs in a daemon thread,
    abandoned on timeout (it holds nothing of ours, and a daemon thread never delays the exit), so the
    wait stays bounded and SIGTERM or Ctrl-C still reach the main thread meanwhile."""
    import threading

    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            ray.init(**options)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, raised there
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=connect, name="hierconsole-ray-connect", daemon=True)
    # Ray's core logs each failed attempt to the process's stderr ("Failed to connect to GCS ... within 5
    # seconds") before its logging is configured, which would break the one-line error: the descriptor
    # is pointed away for the wait (nothing else of ours runs meanwhile) and given back after it.
    saved, quiet = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)
    try:
        thread.start()
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(min(0.2, max(0.0, deadline - time.monotonic())))  # short joins: signals are served between
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(quiet)
    if not outcome:
        address = options["address"]
        raise ConfigError(
            f"--ray-address {address}: the port accepts connections but no Ray cluster answered within "
            f"{timeout:g} s; check that it is the head's GCS port (`ray status` on the head prints the "
            f"address), or raise --ray-connect-timeout for a slow network"
        )
    if outcome[0] is not None:
        raise outcome[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class RayExecutor:
    kind: Executor = Executor.RAY

    def __init__(
        self,
        home: Path,
        address: str = LOCAL_RAY,
        *,
        num_cpus: int | None = None,
        parallel: int | None = None,
        connect_timeout: float = RAY_CONNECT_TIMEOUT,
    ):
        """Connect to the cluster at `address` (LOCAL_RAY: start an instance of `num_cpus` CPUs here).
        `parallel`: jobs at once (None: as many as the cluster has CPUs)."""
        self.home = home
        self.parallel = parallel
        self.home_key = home_key(home)
        self.address = address
        # One bound for the whole connect: the port tried before Ray is imported (Ray waits for minutes on a
        # dead address), then Ray's handshake given what is left of it.
        connect_deadline = time.monotonic() + connect_timeout
        check_reachable(address, connect_timeout)
        ray = self.ray = import_ray()
        self.started_here = False
        self.connected_here = False
        """Whether this executor connected the process to Ray (and so disconnects it when closed); a
        process that was connected already (the console after its first Ray launch, a test) stays so."""
        if not ray.is_initialized():
            options: dict[str, Any] = {
                "namespace": NAMESPACE,
                # Workers print to their worker.log (sent home with their events), not to this terminal.
                "log_to_driver": False,
                "logging_level": logging.ERROR,
            }
            if address == LOCAL_RAY:
                options.update(num_cpus=num_cpus, include_dashboard=False)
            else:
                options["address"] = address
            try:
                if address == LOCAL_RAY:
                    ray.init(**options)
                else:
                    _init_within(ray, options, connect_timeout, connect_deadline)
            except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; the user needs the first line
                if isinstance(exc, HierconsoleError):
                    raise
                where = "start a local Ray instance" if address == LOCAL_RAY else f"connect to Ray at {address}"
                raise HierconsoleError(
                    f"--ray-address {address}: could not {where} ({_first_line(exc)}); check the address and "
                    f"that the cluster runs the same Ray version ({ray.__version__})"
                ) from None
            self.started_here = address == LOCAL_RAY
            self.connected_here = True
        context = ray.get_runtime_context()
        self.gcs_address: str | None = getattr(context, "gcs_address", None)
        if not self.connected_here and address not in (LOCAL_RAY, "auto", self.gcs_address):
            # Ray connects a process to one cluster: a second address would silently mean the first.
            raise HierconsoleError(
                f"--ray-address {address}: this process is connected to the Ray cluster at {self.gcs_address} "
                f"already, and Ray connects a process to one cluster; launch from another console or command"
            )
        self.remote_runner = ray.remote(JobRunner)
        self._bundles: dict[tuple, Any] = {}
        self._capacity: tuple[float, int] | None = None
        self._gpus: int | None = None
        self.closed = False

    # -- the cluster ----------------------------------------------------------------------------------
    def reaches(self, address: str) -> bool:
        return address in (self.address, self.gcs_address)

    def _resources(self) -> dict[str, float]:
        return dict(self.ray.cluster_resources())

    def describe(self) -> str:
        if self.started_here:
            return f"a local Ray instance ({int(self._resources().get('CPU', 0))} CPUs)"
        return f"the Ray cluster at {self.address}"

    def capacity(self, max_parallel: int | None) -> int:  # noqa: ARG002 - the cluster's, not the preset's
        """`parallel`, else as many jobs as the cluster has CPUs (Ray queues those it cannot place)."""
        if self.parallel is not None:
            return self.parallel
        now = time.monotonic()
        if self._capacity is None or now - self._capacity[0] > CAPACITY_SECONDS:
            self._capacity = (now, max(1, int(self._resources().get("CPU", 1))))
        return self._capacity[1]

    def gpus(self) -> int:
        if self._gpus is None:
            self._gpus = int(self._resources().get("GPU", 0))
        return self._gpus

    def check_device(self, device: str, source: str) -> None:
        """A cuda study on a cluster without GPUs is refused before anything is created."""
        if device == "cuda" and self.gpus() == 0:
            raise ConfigError(
                f"{source} = 'cuda', but the Ray cluster at {self.address} has no GPU; run on the CPU "
                f"(--device cpu) or connect to a cluster with GPU nodes (--ray-address)"
            )

    # -- launching ------------------------------------------------------------------------------------
    def _bundle(self, relative: str) -> Any:
        """An object-store copy of one input (a file with its SHA256 sidecar, or a folder), put once per
        version of its files."""
        path = self.home / relative
        if not path.exists():
            raise HierconsoleError(f"{path}: a file the job reads is missing from the home; it cannot be sent to Ray")
        names = [relative]
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        if path.is_file() and sidecar(path).exists():
            names.append(relative + HASH_SIDECAR)
            files.append(sidecar(path))
        key = (relative, tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))
        if key not in self._bundles:
            self._bundles = {k: v for k, v in self._bundles.items() if k[0] != relative}
            self._bundles[key] = self.ray.put(transfer.pack(self.home, names))
        return self._bundles[key]

    def _inputs(self, spec: JobSpec) -> list[str]:
        """The home-relative paths a job reads besides its own folder."""
        paths = [spec.dataset_dir, *(t.path for t in spec.test_splits), *(m.weights for m in spec.models)]
        paths += [p for p in (spec.train_split, spec.val_split, spec.train_taxonomy) if p is not None]
        if spec.rescore is not None:
            paths.append(spec.rescore.embeddings_dir)
        for p in paths:
            if Path(p).is_absolute():
                raise HierconsoleError(
                    f"job {spec.job_id}: its spec names {p}, outside the home; only a job whose files are in "
                    f"the home (studies created by this version) can run on Ray"
                )
        return list(dict.fromkeys(paths))

    def launch(self, job_id: str, folder: Path, spec: JobSpec, *, busy_gpus: set[str]) -> RayHandle:  # noqa: ARG002
        previous = _read_info(folder)
        if previous is not None:
            # An attempt an earlier orchestrator left (its job was judged crashed and resumed): never two.
            self._kill_named(str(previous.get("actor", "")))
        bundles = [self._bundle(p) for p in self._inputs(spec)]
        job_files = transfer.pack(folder, sorted(transfer.folder_state(folder)))
        wants_gpu = spec.device == "cuda" or (spec.device == "auto" and self.gpus() > 0)
        name = f"{self.home_key}/{job_id}/{uuid.uuid4().hex[:8]}"
        actor = self.remote_runner.options(
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",  # outlives this orchestrator, to be re-attached by the next
            num_cpus=spec.threads,
            num_gpus=1 if wants_gpu else 0,
            max_concurrency=4,  # fetch and signal are served while the worker runs
            max_restarts=0,  # a lost worker is a crashed job: `resume` continues it from its checkpoint
        ).remote(job_id, self.home_key, int(time.time()))
        omp = os.environ.get("OMP_NUM_THREADS", str(spec.threads))
        start = actor.start.remote(__version__, layout.spec_path(folder).read_text(), omp, job_files, *bundles)
        info = {
            "executor": str(Executor.RAY),
            "actor": name,
            "namespace": NAMESPACE,
            # What the next orchestrator connects to: the head's GCS address, or the Ray Client address.
            "address": self.address if self.address.startswith("ray://") else (self.gcs_address or self.address),
            # A local instance ends with the process that started it: its jobs cannot outlive it.
            "started_by": [os.getpid(), process_start_time(os.getpid())] if self.started_here else None,
            "seq": 0,
        }
        _write_info(folder, info)
        (folder / layout.WORKER_LOG).touch()  # as a local job's: the log is there from its launch on
        return RayHandle(self, actor, folder, info, start=start)

    def adopt(self, job_id: str, folder: Path, info: dict[str, Any]) -> RayHandle | str:  # noqa: ARG002
        """The handle of a job's live actor, or why there is none."""
        started_by = info.get("started_by")
        if started_by and (started_by[0] != os.getpid() or not pid_alive(int(started_by[0]), started_by[1])):
            return (
                f"it ran on the local Ray instance of hierconsole PID {started_by[0]}, which ended with it; "
                f"resume it with `hierconsole resume`"
            )
        try:
            actor = self.ray.get_actor(str(info["actor"]), namespace=str(info.get("namespace", NAMESPACE)))
        except ValueError:
            return f"its Ray worker {info['actor']} is gone (killed, or its node lost); resume it"
        # Where it runs, if the orchestrator that launched it went before it learnt that.
        placed = None if info.get("node") else actor.placement.remote()
        return RayHandle(self, actor, folder, info, start=placed)

    def _kill_named(self, name: str) -> None:
        if not name:
            return
        with contextlib.suppress(ValueError):
            self.ray.kill(self.ray.get_actor(name, namespace=NAMESPACE), no_restart=True)

    def close(self) -> None:
        """Disconnect; a Ray instance started here ends, and with it any job still on it."""
        if self.closed:
            return
        self.closed = True
        self._bundles.clear()
        if self.connected_here and self.ray.is_initialized():
            self.ray.shutdown()


def connect(home: Path, address: str) -> RayExecutor:
    """The executor to adopt jobs already running on the cluster at `address`."""
    return RayExecutor(home, address)


def _read_info(folder: Path) -> dict[str, Any] | None:
    try:
        info = json.loads((folder / layout.EXECUTOR).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _write_info(folder: Path, info: dict[str, Any]) -> None:
    write_atomically(folder / layout.EXECUTOR, json.dumps(info, indent=1).encode())


class RayHandle:
    """One Ray attempt as the orchestrator drives it; `pump` brings its batches into the home."""

    executor: Executor = Executor.RAY
    gpu: str | None = None

    def __init__(self, owner: RayExecutor, actor: Any, folder: Path, info: dict[str, Any], *, start: Any):
        self.owner = owner
        self.ray = owner.ray
        self.actor = actor
        self.folder = folder
        self.info = info
        self.ack = int(info.get("seq", 0))
        self.start_ref = start
        self.fetch_ref: Any = None
        self.ended = False
        self.dead = False
        """The actor is gone (killed, its node lost): nothing more to ask it."""
        self.returncode: int | None = None
        self.note: str | None = None
        self.pid = int(info.get("pid", 0))
        self.pid_start: str | None = None
        self.node = str(info.get("node", PENDING_NODE if start is not None else ""))

    # -- progress ---------------------------------------------------------------------------------------
    def pump(self) -> None:
        if self.ended:
            return
        if self.start_ref is not None:
            ready, _ = self.ray.wait([self.start_ref], timeout=0)
            if not ready:
                # Waiting to be placed is not being frozen: the job's heartbeat is kept fresh meanwhile.
                (self.folder / layout.HEARTBEAT).touch()
                return
            try:
                placed = self.ray.get(self.start_ref)
            except Exception as exc:  # noqa: BLE001 - a failed start is the job's error
                self.dead = isinstance(exc, self.ray.exceptions.RayActorError)
                self._end(f"the Ray worker could not start the job: {_cause(exc)}")
                return
            self.start_ref = None
            self.pid = int(placed["pid"])
            self.node = f"{placed['host']} {str(placed['node_id'])[:6]}"
            self.info.update(pid=self.pid, node=self.node, worker_pid=placed["worker_pid"])
            _write_info(self.folder, self.info)
        for _ in range(8):  # at most a few batches per tick: a long backlog never stalls the loop
            if self.fetch_ref is None:
                self.fetch_ref = self.actor.fetch.remote(self.ack)
            ready, _ = self.ray.wait([self.fetch_ref], timeout=0)
            if not ready:
                return
            ref, self.fetch_ref = self.fetch_ref, None
            try:
                batch: transfer.Batch = self.ray.get(ref)
            except self.ray.exceptions.RayActorError as exc:
                self.dead = True
                self._end(f"its Ray worker process on {self.node} died ({_cause(exc)}); resume it")
                return
            except Exception as exc:  # noqa: BLE001 - e.g. a lost connection to the cluster
                self._end(f"its Ray worker on {self.node} could not be reached ({_cause(exc)}); resume it")
                return
            self._apply(batch)
            if self.ended or batch.empty:
                return

    def _apply(self, batch: transfer.Batch) -> None:
        if batch.heartbeat_age is not None:
            # The node's clock may differ from ours: the age it reports is what carries over.
            beat = time.time() - batch.heartbeat_age
            path = self.folder / layout.HEARTBEAT
            path.touch()
            os.utime(path, (beat, beat))
        if batch.seq and batch.seq > self.ack:
            # Files first, then the lines that announce them, then the acknowledgement: a crash in
            # between sends the batch again, and writing it twice changes nothing (idempotent keys).
            transfer.unpack(self.folder, batch.files)
            if batch.log:
                with open(self.folder / layout.WORKER_LOG, "ab") as fh:
                    fh.write(batch.log)
            if batch.lines:
                _append_lines(self.folder / layout.EVENTS, batch.lines)
            self.ack = batch.seq
            self.info["seq"] = self.ack
            _write_info(self.folder, self.info)
        if batch.ended:
            self.returncode = batch.returncode
            self._end(f"worker exited with status {batch.returncode} on {self.node} without a final event; see worker.log")

    def _end(self, note: str) -> None:
        self.ended = True
        self.note = note

    def running(self) -> bool:
        return not self.ended

    # -- control ----------------------------------------------------------------------------------------
    def terminate(self) -> None:
        if self.start_ref is not None:
            # Not placed yet: nothing has started, so nothing is lost by ending it at once.
            self.ray.kill(self.actor, no_restart=True)
            self._end("cancelled before Ray placed it")
            return
        self.actor.signal.remote(signal.SIGTERM)

    def kill(self) -> None:
        if not self.ended:
            self.actor.signal.remote(signal.SIGKILL)
            # A worker that does not answer (a frozen node) is ended by Ray itself.
            with contextlib.suppress(Exception):
                self.ray.kill(self.actor, no_restart=True)
            self._end(f"its Ray worker on {self.node} was killed")

    def exit_note(self) -> str | None:
        return self.note

    def release(self) -> None:
        """Everything is home: the actor drops its scratch home and exits (it is detached: never left)."""
        if not self.dead:
            self.actor.close.remote()

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ended and time.monotonic() < deadline:
            self.pump()
            time.sleep(0.1)


def _append_lines(path: Path, lines: bytes) -> None:
    """Append the worker's lines as it would have: after a torn last line, on a line of its own."""
    with open(path, "a+b") as fh:
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write(lines)
        fh.flush()
        os.fsync(fh.fileno())


def _cause(exc: BaseException) -> str:
    """The useful line of a Ray error (its own type, or the remote exception's last line)."""
    text = str(exc).strip().splitlines()
    meaningful = [line for line in text if line.strip() and not line.startswith(" ")]
    return (meaningful[-1] if meaningful else type(exc).__name__)[:300]
