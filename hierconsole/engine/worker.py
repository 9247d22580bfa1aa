"""A worker process: `python -m hierconsole.engine.worker --home HOME SPEC.json [SPEC.json ...]`.

Several specs (final jobs of the seeds of one study) are trained in this one process as one stacked
computation (`engine.stacked`); each job keeps its own folder, lock, heartbeat, events and exit record,
as if it ran alone.

Started with `--standby` instead of a spec, it is a fork server: it imports the engine (torch, geoopt:
seconds) once, says `ready` on standard output, and then forks one worker per spec path it reads on
standard input, answering each with the worker's PID (`_serve`). Each fork is a fresh process holding
nothing but the imports, so no job sees state another left behind, and a launch pays no start-up. It
ends (EXIT_UNUSED) when its standard input closes, as it does when the orchestrator dies; the workers it
forked run on.

It never opens the store. It appends typed events (`contract.events`) as JSON lines to `events.jsonl`
beside its spec (the orchestrator tails that file and can replay it after a crash) and touches
`heartbeat` every few seconds. The spec's paths are relative to HOME.
Exit statuses: `contract.exit_status`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from hierconsole.contract import events, layout
from hierconsole.contract.exit_status import (
    EXIT_ALREADY_ACTIVE,
    EXIT_CANCELLED,
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_UNUSED,
)
from hierconsole.contract.jobspec import JobSpec
from hierconsole.contract.liveness import claim_job_lock
from hierconsole.contract.standby import READY, STANDBY_FLAG, STANDBY_NAME, WORKER_NAME
from hierconsole.errors import HierconsoleError
from hierconsole.locations import study_dir
from hierconsole.registry import COMPONENTS_FOLDER
from hierconsole.vocabulary import SCORING_KINDS

HEARTBEAT_SECONDS = 2.0
SLOW_START_ENV = "HIERCONSOLE_FAULT_SLOW_START"
"""Fault injection for the recovery tests: seconds the worker waits before anything else, as a start on a
loaded machine or a cold filesystem can take, so that its first heartbeat comes ticks after its launch."""


class EventLog:
    """Appends events; each line is written whole and flushed, so a kill leaves at most a torn last line."""

    DURABLE = (events.Checkpoint, events.Final, events.Done, events.Failed)
    """Events fsynced at once: they mark work a resumed run must not redo or lose."""

    def __init__(self, path: Path):
        self.path = path
        self._fh = open(path, "a+b")  # noqa: SIM115 - lives as long as the worker
        self._lock = threading.Lock()
        # A predecessor killed mid-write left a torn line without its newline: end it, so that our first
        # line stands alone (the fragment is then reported as one malformed line, not glued to ours).
        if self._fh.tell() > 0:
            self._fh.seek(-1, os.SEEK_END)
            if self._fh.read(1) != b"\n":
                self._fh.write(b"\n")
                self._fh.flush()

    def __call__(self, event: events.Event) -> None:
        line = events.to_line(event).encode()
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            if isinstance(event, self.DURABLE):
                os.fsync(self._fh.fileno())


def _heartbeat(path: Path, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_SECONDS):
        path.touch()


def _name_process(name: str) -> None:
    with contextlib.suppress(OSError):  # Linux only; the name is for people, nothing reads it back
        Path("/proc/self/comm").write_text(name)


def _serve(home: Path) -> Path | None:
    """A standby's life: import the engine, then fork a worker for each spec path read on standard input
    and answer with its PID. Returns in a forked worker (the spec it is to run, its output already going
    to the job's log); None in the standby itself once its input closes.

    A worker is forked twice over (standby -> intermediate -> worker), and the intermediate exits at once,
    so that the worker is handed to the orchestrator, which asked to adopt orphans just for the hand-off
    (`study.executors.standby`): the orchestrator is then its parent as it is a cold worker's, and reaps
    its exit status. The worker reports its own PID once it leads its session (the orchestrator then sets
    that session's priority), and the PID is answered only after the intermediate is reaped, when the
    worker is the orchestrator's."""
    import hierconsole.engine.evaluator  # noqa: F401 - the imports a launch would otherwise wait for
    import hierconsole.engine.trainer  # noqa: F401

    _name_process(STANDBY_NAME)
    try:
        os.write(1, READY + b"\n")
    except BrokenPipeError:  # the orchestrator died while we imported
        return None
    while line := sys.stdin.buffer.readline():
        spec_path = Path(os.fsdecode(line.rstrip(b"\n")))
        read_pid, write_pid = os.pipe()
        try:
            intermediate = os.fork()
        except OSError as exc:
            os.close(read_pid)
            os.close(write_pid)
            os.write(1, f"error {exc.strerror}\n".encode())
            continue
        if intermediate == 0:
            os.close(read_pid)
            try:
                worker = os.fork()
            except OSError:
                os._exit(1)
            if worker == 0:
                _become_worker(spec_path)
                os.write(write_pid, f"{os.getpid()}\n".encode())
                os.close(write_pid)
                return spec_path
            os._exit(0)
        os.close(write_pid)
        with os.fdopen(read_pid, "rb") as answer:
            pid = answer.read().strip()  # until the worker and the intermediate closed their ends
        os.waitpid(intermediate, 0)
        try:
            os.write(1, b"%s\n" % pid if pid else b"error fork\n")
        except BrokenPipeError:  # the orchestrator died during the hand-off: the worker runs on, adoptable
            return None
    return None


def _become_worker(spec_path: Path) -> None:
    """In a forked worker: a worker's name (before its session: a process named as its standby and leading
    a session is the standby), a session of its own (as a cold worker's `start_new_session`), no input,
    and output to the job's worker log, as a worker started for that job has."""
    _name_process(WORKER_NAME)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    log = os.open(spec_path.parent / layout.WORKER_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


class _Job:
    """One job folder of this process: its lock (held for the worker's whole life, so the same job can
    never run twice, whoever launches it) and its event log."""

    def __init__(self, spec_path: Path):
        self.spec_path = spec_path
        self.folder = spec_path.parent
        self.lock = open(self.folder / layout.LOCK, "a+")  # noqa: SIM115 - lives as long as the worker
        claim_job_lock(self.lock)  # BlockingIOError if held
        self.emit = EventLog(self.folder / layout.EVENTS)

    def fail(self, error: str, *, text: str | None = None) -> None:
        """Record the failure: ``text`` (default ``error``) in error.txt, ``error`` in the event."""
        (self.folder / layout.ERROR).write_text(error if text is None else text)
        self.emit(events.Failed(error=error))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hierconsole.engine.worker")
    parser.add_argument("--home", type=Path, required=True, help="the home the spec's paths are relative to")
    parser.add_argument(STANDBY_FLAG, action="store_true", help="import the engine, then fork a worker for each SPEC read from stdin")
    parser.add_argument("spec", type=Path, nargs="*", help="job specs; several are trained as one stack")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    spec_paths: list[Path] = args.spec
    if args.standby:
        if spec_paths:
            parser.error("--standby takes its specs from stdin, not the command line")
        received = _serve(args.home)
        if received is None:
            return EXIT_UNUSED
        spec_paths = [received]
    elif not spec_paths:
        parser.error("a SPEC path is required (or --standby)")
    _name_process(WORKER_NAME)
    if slow_start := os.environ.get(SLOW_START_ENV):
        time.sleep(float(slow_start))
    jobs: list[_Job] = []
    for spec_path in spec_paths:
        try:
            jobs.append(_Job(spec_path))
        except BlockingIOError:
            print(f"job in {spec_path.parent} is already running in another process", file=sys.stderr)
            return EXIT_ALREADY_ACTIVE
    stop = threading.Event()

    def on_term(signum: int, frame: object) -> None:  # noqa: ARG001
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    for job in jobs:
        (job.folder / layout.HEARTBEAT).touch()
    beat_stop = threading.Event()
    for job in jobs:
        threading.Thread(target=_heartbeat, args=(job.folder / layout.HEARTBEAT, beat_stop), daemon=True).start()
    try:
        specs = [JobSpec.read(job.spec_path).resolved(args.home) for job in jobs]
        for study_id in {spec.study_id for spec in specs}:
            # The study's copies of its own components (`module:Name`) are the ones its cells import.
            own = study_dir(args.home, study_id) / COMPONENTS_FOLDER
            if own.is_dir() and str(own) not in sys.path:
                sys.path.insert(0, str(own))
        # torch is imported only now, after the heartbeat started: its import takes seconds.
        from hierconsole.engine.determinism import configure_device
        from hierconsole.engine.trainer import Cancelled, FactorialTrainer, resolve_device

        devices = {spec.device for spec in specs}
        if len(devices) > 1:
            raise ValueError(f"jobs of one process must ask for one device, not {sorted(devices)}")
        settings = configure_device(resolve_device(specs[0].device))
        for job, spec in zip(jobs, specs, strict=True):
            job.emit(
                events.Start(
                    pid=os.getpid(),
                    device=settings.device,
                    threads=spec.threads,
                    visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
                    device_name=settings.device_name,
                    deterministic=settings.deterministic,
                    cublas_workspace=settings.cublas_workspace,
                    float32_matmul=settings.float32_matmul,
                    torch_version=settings.torch_version,
                    cuda_version=settings.cuda_version,
                    jobs_in_process=len(jobs),
                )
            )
        try:
            if len(specs) > 1:
                from hierconsole.engine.stacked import StackedTrainer

                StackedTrainer(specs, [job.emit for job in jobs], stop.is_set).run()
            elif specs[0].kind in SCORING_KINDS:
                from hierconsole.engine.evaluator import run_evaluation

                run_evaluation(specs[0], jobs[0].emit, stop.is_set)
            else:
                FactorialTrainer(specs[0], jobs[0].emit, stop.is_set).run()
        except Cancelled as exc:
            for job in jobs:
                job.emit(events.Cancelled(message=str(exc)))
            return EXIT_CANCELLED
        for job in jobs:
            job.emit(events.Done())
        return EXIT_DONE
    except HierconsoleError as exc:
        # The user's to fix (replaced data, an unreadable input): the message, not a traceback.
        for job in jobs:
            job.fail(str(exc), text=f"{exc}\n")
        return EXIT_FAILED
    except BaseException:  # noqa: BLE001 - the orchestrator records the tail as the job's error
        tail = traceback.format_exc()[-4000:]
        for job in jobs:
            job.fail(tail)
        return EXIT_FAILED
    finally:
        beat_stop.set()


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown.

    Unloading torch's modules takes about half a second after the last event, during which the job
    still counts as running: every job of a study (a family runs dozens) would wait that long for its
    successor's launch. Nothing is lost: each event line is flushed as it is written (the final ones
    fsynced), checkpoints and embeddings are durable writes, and the kernel releases the job's lock."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
