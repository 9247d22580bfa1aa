"""A worker process: `python -m hierconsole.engine.worker --home HOME SPEC.json`.

Started with `--standby` instead of a spec, it imports the engine (torch, geoopt: seconds) first and then
reads its spec's path from standard input, so that an orchestrator can start it before the job exists
and a launch pays no start-up; standard input closing before a path arrives ends it (EXIT_UNUSED).

It never opens the store. It appends typed events (`contract.events`) as JSON lines to `events.jsonl`
beside its spec (the orchestrator tails that file and can replay it after a crash) and touches
`heartbeat` every few seconds. The spec's paths are relative to HOME.
Exit status: 0 done, 3 cancelled (SIGTERM), 1 failed (traceback tail in the last event and error.txt).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import sys
import threading
import traceback
from pathlib import Path

from hierconsole.contract import events, layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.errors import HierconsoleError
from hierconsole.vocabulary import SCORING_KINDS

HEARTBEAT_SECONDS = 2.0
EXIT_DONE, EXIT_FAILED, EXIT_CANCELLED, EXIT_ALREADY_ACTIVE, EXIT_UNUSED = 0, 1, 3, 4, 5


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


def _await_spec() -> Path | None:
    """A standby's wait: the engine imported, then one line naming the spec. Output goes to the job's
    worker log from then on, as it would for a worker started for that job."""
    import hierconsole.engine.evaluator  # noqa: F401 - the imports a launch would otherwise wait for
    import hierconsole.engine.trainer  # noqa: F401

    line = sys.stdin.readline().strip()
    if not line:
        return None
    spec_path = Path(line)
    log = os.open(spec_path.parent / layout.WORKER_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    return spec_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hierconsole.engine.worker")
    parser.add_argument("--home", type=Path, required=True, help="the home the spec's paths are relative to")
    parser.add_argument("--standby", action="store_true", help="import the engine, then read SPEC from stdin")
    parser.add_argument("spec", type=Path, nargs="?")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.standby:
        received = _await_spec()
        if received is None:
            return EXIT_UNUSED
        spec_path = received
    elif args.spec is None:
        parser.error("a SPEC path is required (or --standby)")
    else:
        spec_path = args.spec
    folder = spec_path.parent
    # Held for the worker's whole life: the same job can never run twice, whoever launches it.
    lock = open(folder / layout.LOCK, "a+")  # noqa: SIM115
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"job in {folder} is already running in another process", file=sys.stderr)
        return EXIT_ALREADY_ACTIVE
    emit = EventLog(folder / layout.EVENTS)
    stop = threading.Event()

    def on_term(signum: int, frame: object) -> None:  # noqa: ARG001
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    (folder / layout.HEARTBEAT).touch()
    beat_stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(folder / layout.HEARTBEAT, beat_stop), daemon=True).start()
    try:
        spec = JobSpec.read(spec_path).resolved(args.home)
        # torch is imported only now, after the heartbeat started: its import takes seconds.
        from hierconsole.engine.trainer import Cancelled, FactorialTrainer, resolve_device

        emit(
            events.Start(
                pid=os.getpid(),
                device=str(resolve_device(spec.device)),
                threads=spec.threads,
                visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
            )
        )
        try:
            if spec.kind in SCORING_KINDS:
                from hierconsole.engine.evaluator import run_evaluation

                run_evaluation(spec, emit, stop.is_set)
            else:
                FactorialTrainer(spec, emit, stop.is_set).run()
        except Cancelled as exc:
            emit(events.Cancelled(message=str(exc)))
            return EXIT_CANCELLED
        emit(events.Done())
        return EXIT_DONE
    except HierconsoleError as exc:
        # The user's to fix (replaced data, an unreadable input): the message, not a traceback.
        (folder / layout.ERROR).write_text(f"{exc}\n")
        emit(events.Failed(error=str(exc)))
        return EXIT_FAILED
    except BaseException:  # noqa: BLE001 - the orchestrator records the tail as the job's error
        tail = traceback.format_exc()[-4000:]
        (folder / layout.ERROR).write_text(tail)
        emit(events.Failed(error=tail))
        return EXIT_FAILED
    finally:
        beat_stop.set()


if __name__ == "__main__":
    sys.exit(main())
