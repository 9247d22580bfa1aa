"""What the store's backups say of themselves: whether the latest one could be taken."""

from __future__ import annotations

from pathlib import Path

from hierconsole.study.db import backups


def backup_skipped(home: Path) -> str | None:
    """Why the latest backup of the home's store was not taken, with when (None: it was, or none was due).

    Said by every command that ran the store and by `doctor`: a repair needs a recent backup."""
    return backups.skipped(home)
