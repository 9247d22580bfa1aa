"""Backups of the store: consistent copies under the home's `backups/` folder, newest last."""

from __future__ import annotations

from pathlib import Path

BACKUP_DIR = "backups"


def backup_dir(home: Path) -> Path:
    return home / BACKUP_DIR


def listed(home: Path) -> list[Path]:
    """The backups there are, oldest first (their names sort by the time they were taken)."""
    folder = backup_dir(home)
    return sorted(folder.glob("hierconsole-*.duckdb")) if folder.is_dir() else []


def newest(home: Path) -> Path | None:
    found = listed(home)
    return found[-1] if found else None
