"""Durable file writes, the same on both sides of the process boundary: a worker's checkpoints and models,
and the files the orchestrator writes into a job folder from a remote worker."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

HASH_SIDECAR = ".sha256"
"""Appended to a file's name for the file holding its SHA256 (checkpoints and final models). The sidecar is
written before the file it vouches for (``write_with_hash``), and copied before it (``transfer.changes``),
so that a kill never leaves the file in place without its hash."""


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (its directory entry reaches the disk), where the filesystem lets
    a folder be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Temp file, fsync, rename, fsync of the folder: a reader (or a crash) sees the old file or the new
    one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def sidecar(path: Path) -> Path:
    """The file holding `path`'s SHA256."""
    return path.with_name(path.name + HASH_SIDECAR)


def write_with_hash(path: Path, data: bytes) -> str:
    """Write `data` atomically with its SHA256 sidecar, the sidecar first: a kill between the two writes
    leaves a sidecar whose file never appeared (ignored), never a file without its hash. The hash."""
    digest = hashlib.sha256(data).hexdigest()
    write_atomically(sidecar(path), digest.encode())
    write_atomically(path, data)
    return digest


def recorded_hash(path: Path) -> str | None:
    """The SHA256 recorded beside `path`, or None when it has no sidecar."""
    side = sidecar(path)
    return side.read_text().strip() if side.exists() else None
