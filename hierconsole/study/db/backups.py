"""Backups of the store: consistent copies under `HOME/backups/`, taken by the holder's writer thread
every `BackupPolicy.minutes` while it writes and at each study lock, the newest `keep` kept.

A backup is taken as the live snapshot is (a CHECKPOINT, then a byte copy in another process, then an
atomic rename), so it is a store any hierconsole opens; `doctor --repair` starts from the newest one and
replays the job folders' event logs on top of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from hierconsole.errors import ConfigError
from hierconsole.study.db import live

BACKUP_DIR = "backups"
PREFIX = "hierconsole-"
ENV_MINUTES = "HIERCONSOLE_BACKUP_MINUTES"
ENV_KEEP = "HIERCONSOLE_BACKUP_KEEP"
SKIPPED_NOTE = "SKIPPED.txt"
"""In the backups folder while the holder's latest backup could not be taken (no room, an I/O error): one
line saying when and why, read by `doctor` and the commands that ran the store; removed by the next backup."""
DEFAULT_MINUTES = 30.0
DEFAULT_KEEP = 5

log = logging.getLogger("hierconsole.backups")


@dataclass(frozen=True)
class BackupPolicy:
    minutes: float = DEFAULT_MINUTES
    """How often the holder copies its store while it writes; 0 turns the periodic copies off."""
    keep: int = DEFAULT_KEEP
    """How many backups are kept (the oldest go first); at least 1."""

    @classmethod
    def from_env(cls) -> BackupPolicy:
        """$HIERCONSOLE_BACKUP_MINUTES and $HIERCONSOLE_BACKUP_KEEP, else the defaults."""
        try:
            minutes = float(os.environ.get(ENV_MINUTES, DEFAULT_MINUTES))
            keep = int(os.environ.get(ENV_KEEP, DEFAULT_KEEP))
        except ValueError:
            raise ConfigError(
                f"${ENV_MINUTES} must be a number of minutes and ${ENV_KEEP} a whole number of copies "
                f"(defaults {DEFAULT_MINUTES:g} and {DEFAULT_KEEP})"
            ) from None
        if minutes < 0 or keep < 1:
            raise ConfigError(f"${ENV_MINUTES} must be 0 or more and ${ENV_KEEP} at least 1")
        return cls(minutes, keep)


def backup_dir(home: Path) -> Path:
    return home / BACKUP_DIR


def listed(home: Path) -> list[Path]:
    """The backups there are, oldest first (their names sort by the time they were taken)."""
    folder = backup_dir(home)
    return sorted(folder.glob(f"{PREFIX}*.duckdb")) if folder.is_dir() else []


def newest(home: Path) -> Path | None:
    found = listed(home)
    return found[-1] if found else None


class Keeper:
    """Takes one holder's backups; called by its writer thread only, between transactions."""

    def __init__(self, home: Path, source: Path, policy: BackupPolicy):
        self.home = home
        self.source = source
        self.policy = policy
        self.last = time.monotonic()
        self.requested = False
        self.changed = False

    def due(self) -> bool:
        if self.requested:
            return True
        periodic = self.policy.minutes > 0 and time.monotonic() - self.last >= self.policy.minutes * 60
        return periodic and self.changed

    def take(self, con: duckdb.DuckDBPyConnection) -> Path | None:
        """A backup now; None when the WAL could not be checkpointed or the disk is too full (next time).

        A skip for want of room or an I/O error is written down (`skipped`): a home that ran for hours
        without one backup must say so, not be found out at the repair that needed it."""
        now = datetime.now(UTC)
        target = backup_dir(self.home) / f"{PREFIX}{now.strftime('%Y%m%d-%H%M%S-%f')}.duckdb"
        try:
            skipped = live.consistent_copy(con, self.source, target)
        except (OSError, subprocess.SubprocessError) as exc:
            skipped = f"the copy failed ({exc})"
        self.last = time.monotonic()
        note = backup_dir(self.home) / SKIPPED_NOTE
        if skipped is not None:
            log.info("could not back up the store: %s", skipped)
            if skipped != live.NOT_CHECKPOINTED:  # that one is taken at the next write, as always
                with contextlib.suppress(OSError):  # no room even for a line: `skipped` in memory still says it
                    note.write_text(f"{now.strftime('%Y-%m-%d %H:%M:%S')} UTC: {skipped}\n")
            return None
        note.unlink(missing_ok=True)
        self.requested = self.changed = False
        for old in listed(self.home)[: -self.policy.keep]:
            old.unlink(missing_ok=True)
        return target


def skipped(home: Path) -> str | None:
    """Why the holder's latest backup of this home's store was not taken (with when), None if it was."""
    try:
        return (backup_dir(home) / SKIPPED_NOTE).read_text(errors="replace").strip() or None
    except OSError:
        return None
