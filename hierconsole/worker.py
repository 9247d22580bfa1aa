"""A worker process: `python -m hierconsole.worker SPEC.json`.

It never opens the store. It appends JSON-lines events to `events.jsonl` beside its spec (the
orchestrator tails that file and can replay it after a crash) and touches `heartbeat` every few seconds.
Exit status: 0 done, 3 cancelled (SIGTERM), 1 failed (traceback tail in the last event and error.txt).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

HEARTBEAT_SECONDS = 2.0
EXIT_DONE, EXIT_FAILED, EXIT_CANCELLED, EXIT_ALREADY_ACTIVE = 0, 1, 3, 4


class EventLog:
    """Appends events; each line is written whole and flushed, so a kill leaves at most a torn last line."""

    def __init__(self, path: Path):
        self.path = path
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the worker
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        event = {"ts": time.time(), **event}
        line = json.dumps(event, separators=(",", ":"), allow_nan=True) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            if event.get("kind") in ("checkpoint", "final", "done", "failed"):
                os.fsync(self._fh.fileno())


def _heartbeat(path: Path, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_SECONDS):
        path.touch()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec_path = Path(argv[0])
    folder = spec_path.parent
    # Held for the worker's whole life: the same job can never run twice, whoever launches it.
    lock = open(folder / "job.lock", "a+")  # noqa: SIM115
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"job in {folder} is already running in another process", file=sys.stderr)
        return EXIT_ALREADY_ACTIVE
    emit = EventLog(folder / "events.jsonl")
    stop = threading.Event()

    def on_term(signum, frame):  # noqa: ARG001
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    (folder / "heartbeat").touch()
    beat_stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(folder / "heartbeat", beat_stop), daemon=True).start()

    from hierconsole.jobspec import JobSpec

    spec = JobSpec.read(spec_path)
    from hierconsole.training import resolve_device

    emit(
        {
            "kind": "start",
            "key": f"start:{os.getpid()}",
            "pid": os.getpid(),
            "device": str(resolve_device(spec.device)),
            "threads": spec.threads,
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }
    )
    try:
        from hierconsole.training import Cancelled

        try:
            if spec.kind in ("evaluate", "rescore"):
                from hierconsole.evaluation import run_evaluation

                run_evaluation(spec, emit, stop.is_set)
            else:
                from hierconsole.training import FactorialTrainer

                FactorialTrainer(spec, emit, stop.is_set).run()
        except Cancelled as exc:
            emit({"kind": "cancelled", "key": "cancelled", "message": str(exc)})
            return EXIT_CANCELLED
        emit({"kind": "done", "key": "done"})
        return EXIT_DONE
    except BaseException:  # noqa: BLE001 - the orchestrator records the tail as the job's error
        tail = traceback.format_exc()[-4000:]
        (folder / "error.txt").write_text(tail)
        emit({"kind": "failed", "key": "failed", "error": tail})
        return EXIT_FAILED
    finally:
        beat_stop.set()


if __name__ == "__main__":
    sys.exit(main())
