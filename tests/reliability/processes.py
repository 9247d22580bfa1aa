"""The processes a command started, read from /proc (Linux): to show that none outlives a stop."""

from __future__ import annotations

import os
from pathlib import Path

from hierconsole.contract.standby import STANDBY_FLAG, WORKER_NAME

PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, None once it is gone (a zombie counts as gone: it runs nothing)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces and parens
    return (None if fields[0] == "Z" else (fields[0], int(fields[1])))  # type: ignore[return-value]


def cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _name_and_session(pid: int) -> tuple[str, int] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    name, _, rest = text.rpartition(")")
    return name.partition("(")[2], int(rest.split()[3])


def is_standby(pid: int) -> bool:
    """A standby worker: started with STANDBY_FLAG and leading its session. What it forks keeps its command
    line, but a forked worker takes WORKER_NAME before it leads a session of its own, and the fork between
    them (which exits at once) leads none."""
    found = _name_and_session(pid)
    return found is not None and found[0] != WORKER_NAME and found[1] == pid and STANDBY_FLAG in cmdline(pid)


def is_worker(pid: int) -> bool:
    """A job's worker, cold or forked by a standby."""
    found = _name_and_session(pid)
    if found is None:
        return False
    line = cmdline(pid)
    return found[0] == WORKER_NAME or ("hierconsole.engine.worker" in line and STANDBY_FLAG not in line)


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, theirs, ...)."""
    parents: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = stat[1]
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if _stat(pid) is not None}


def standbys_of(home: Path) -> list[int]:
    """PIDs of the live standby workers started for `home` (others' may run beside a test, e.g. under
    pytest-xdist), found through /proc rather than the orchestrator."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        pid = int(entry.name)
        if os.fsencode(home) in argv and is_standby(pid) and _stat(pid) is not None:
            found.append(pid)
    return found
