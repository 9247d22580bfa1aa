"""Is a worker still alive? PIDs judged with their kernel start time, and job folders by their lock file."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from hierconsole.contract import layout


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if no such process.

    Together with the PID it names one process: a PID reused after a crash has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None
    # Field 22, counted after the parenthesised command name (which may itself hold spaces).
    return stat.rsplit(")", 1)[1].split()[19]


def pid_alive(pid: int, start: str | None) -> bool:
    if pid <= 0:
        return False
    current = process_start_time(pid)
    if current is not None:
        if current == start or start is None:
            # A zombie (our own child that exited and was not yet reaped) is not alive.
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                return False
            return state != "Z"
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start is None


def claim_job_lock(fh: IO[str]) -> None:
    """Take a job folder's lock (BlockingIOError if a live worker holds it) and write this process's PID
    in it, so an orchestrator that never learnt which process runs the job can find and adopt it."""
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()


def job_lock_holder(folder: Path) -> int | None:
    """The PID of the live worker holding the job's lock, or None (nobody holds it, or its holder had not
    written its PID yet: a worker from before PIDs were written, or one a moment into its start)."""
    if not job_lock_held(folder):
        return None
    try:
        text = (folder / layout.LOCK).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def job_lock_held(folder: Path) -> bool:
    """Whether some live worker holds the job's lock file (workers take it for their whole life)."""
    path = folder / layout.LOCK
    if not path.exists():
        return False
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False
