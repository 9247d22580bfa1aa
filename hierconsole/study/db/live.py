"""The live snapshot: how a second shell reads a store that another process holds.

DuckDB admits no second opener, not even a read-only one, while a process has the file open for
writing. So the holder (the console, `run`, `resume`) publishes a consistent copy of its store into
`HOME/.live/` from its writer thread, between transactions: a CHECKPOINT, a byte copy of the file,
then an atomic rename, so a reader sees either the previous snapshot or the new one. Read commands that
find the store held open the snapshot read-only (see `Store`).

Chosen over the alternatives because it needs no server and no protocol: a reader is the same code
over the same schema and views, and the holder's cost is bounded (`Publisher` spaces snapshots so that
copying takes at most a tenth of the writer's time). Reading the job folders' event logs instead would
show progress but not effects, audits or exports; a local socket would need a second query language.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from hierconsole.contract.liveness import pid_alive, process_start_time
from hierconsole.locations import wal_path

LIVE_DIR = ".live"
SNAPSHOT = "snapshot.duckdb"
HOLDER = "holder.json"
REFRESH_SECONDS = 2.0
"""The shortest interval between snapshots, and how long a store is open before its first one (so
short commands, which close sooner, never pay for one)."""
NOT_CHECKPOINTED = "the WAL was not checkpointed"
"""Why a copy is skipped while a reader's transaction keeps the WAL: it is tried again at the next write."""
SPARE_BYTES = 64 * 2**20
"""Free space a snapshot leaves beyond the store's size (the store grows too)."""
MAX_SHARE = 0.1
"""Snapshots are spaced so that taking them costs at most this share of the writer's time."""

log = logging.getLogger("hierconsole.live")


@dataclass(frozen=True)
class Snapshot:
    path: Path
    pid: int
    taken_at: float

    def describe(self) -> str:
        age = max(0.0, time.time() - self.taken_at)
        return f"live snapshot of the store held by PID {self.pid}, {age:.0f} s old"


def _holder_file(home: Path) -> Path:
    return home / LIVE_DIR / HOLDER


def latest(home: Path) -> Snapshot | None:
    """The snapshot a live holder published, or None (none published, or its holder is gone)."""
    try:
        meta = json.loads(_holder_file(home).read_text())
        pid, start, taken_at = int(meta["pid"]), meta.get("pid_start"), float(meta["taken_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path = home / LIVE_DIR / SNAPSHOT
    if not path.exists() or not pid_alive(pid, start):
        return None
    return Snapshot(path, pid, taken_at)


class Publisher:
    """Publishes snapshots of one holder's store; called by its writer thread only."""

    def __init__(self, home: Path, source: Path):
        self.source = source
        """The store file the holder writes."""
        self.folder = home / LIVE_DIR
        self.opened = time.monotonic()
        self.last = self.opened
        self.interval = REFRESH_SECONDS
        self.changed = True
        self.published = False
        self.pid = os.getpid()

    def maybe_publish(self, con: duckdb.DuckDBPyConnection, *, changed: bool) -> None:
        self.changed = self.changed or changed
        if not self.changed or time.monotonic() - self.last < self.interval:
            return
        began = time.monotonic()
        done = False
        try:
            done = self._publish(con)
        except (OSError, subprocess.SubprocessError) as exc:
            # A snapshot is a convenience for other shells: its failure must never stop the holder.
            # (A failed CHECKPOINT is the store's own failure and propagates to it.)
            log.info("could not publish the live snapshot: %s", exc)
        took = time.monotonic() - began
        self.last = time.monotonic()
        self.interval = max(REFRESH_SECONDS, took / MAX_SHARE)
        self.changed = not done

    def _publish(self, con: duckdb.DuckDBPyConnection) -> bool:
        self.folder.mkdir(exist_ok=True)
        if consistent_copy(con, self.source, self.folder / SNAPSHOT, tmp=self._tmp()) is not None:
            return False
        meta = {"pid": self.pid, "pid_start": process_start_time(self.pid), "taken_at": time.time()}
        holder = _holder_file(self.folder.parent)
        staged = holder.with_name(f".{HOLDER}.{self.pid}")
        staged.write_text(json.dumps(meta))
        os.replace(staged, holder)
        self.published = True
        return True

    def _tmp(self) -> Path:
        return self.folder / f".{SNAPSHOT}.{self.pid}"

    def withdraw(self) -> None:
        """The holder closes (or can no longer write): its snapshot would only go stale."""
        self._tmp().unlink(missing_ok=True)
        if self.published:
            with contextlib.suppress(OSError, ValueError, KeyError):
                if json.loads(_holder_file(self.folder.parent).read_text())["pid"] == self.pid:
                    _holder_file(self.folder.parent).unlink()
                    (self.folder / SNAPSHOT).unlink(missing_ok=True)
            self.published = False
        with contextlib.suppress(OSError):
            self.folder.rmdir()  # only if empty: another holder's files stay


def consistent_copy(
    con: duckdb.DuckDBPyConnection, source: Path, target: Path, *, tmp: Path | None = None
) -> str | None:
    """Copy the store `source` (open on `con`, by its only writer) to `target` as a consistent store;
    None when done, else why it was skipped (the WAL not checkpointed, too little free space). Used by
    the live snapshot and by the backups."""
    # After a CHECKPOINT the file holds every commit and the WAL is empty, and nothing else writes it
    # while this (the writer) thread copies it: the copy is a consistent store. A byte copy costs
    # milliseconds where a logical copy (COPY FROM DATABASE) took seconds on a large store. The copy
    # runs in another process: closing any descriptor of the file in *this* process would drop
    # DuckDB's POSIX lock on it, and let a second writer in.
    con.execute("CHECKPOINT")
    wal = wal_path(source)
    if wal.exists() and wal.stat().st_size > 0:
        # The checkpoint did not take everything in: the file alone is an older state. Next time.
        log.info("copy of the store skipped: the WAL was not checkpointed")
        return NOT_CHECKPOINTED
    target.parent.mkdir(parents=True, exist_ok=True)
    size = source.stat().st_size
    free = shutil.disk_usage(target.parent).free
    if free < 2 * size + SPARE_BYTES:
        # A copy must never be what fills the disk the store itself needs.
        why = (
            f"too little free space for a copy of the store: a copy of its {_mib(size)} needs "
            f"{_mib(2 * size + SPARE_BYTES)} free (room for the store to grow kept), {_mib(free)} is"
        )
        log.info("copy of the store skipped: %s", why)
        return why
    staged = tmp or target.with_name(f".{target.name}.{os.getpid()}")
    try:
        subprocess.run(["cp", str(source), str(staged)], check=True, capture_output=True, timeout=600)
        os.replace(staged, target)
    finally:
        staged.unlink(missing_ok=True)
    return None


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"
