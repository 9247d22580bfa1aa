"""Atomic, verifiable checkpoints.

A checkpoint is written to a temporary file, fsynced and renamed into place, so a kill leaves either the
old file or the new one. Its SHA256 is written beside it the same way, before it, so that no checkpoint
is ever in place without its hash; a file whose hash is missing or wrong (truncated by a crash of the
machine, say) is skipped and the one before it is used. Payloads hold only tensors, numbers, strings and
containers of them, so `torch.load(weights_only=True)` reads them.
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path
from typing import Any

import torch

from hierconsole.contract.durable import recorded_hash, sidecar, write_with_hash

_NAME_RE = re.compile(r"^ckpt-(\d{6})\.pt$")


def save_payload(path: Path, payload: dict[str, Any]) -> str:
    """Write `payload` atomically with a SHA256 sidecar; return the hash."""
    buf = io.BytesIO()
    torch.save(payload, buf)
    # The hash lands first (write_with_hash): a checkpoint in place without it would be skipped on resume.
    return write_with_hash(path, buf.getvalue())


def load_payload(path: Path, *, verify: bool = True) -> dict[str, Any]:
    data = path.read_bytes()
    if verify:
        recorded = recorded_hash(path)
        if recorded is None:
            raise ValueError(f"checkpoint {path} has no recorded SHA256 ({sidecar(path).name} is missing)")
        if recorded != hashlib.sha256(data).hexdigest():
            raise ValueError(f"checkpoint {path} does not match its recorded SHA256 (truncated?)")
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def checkpoint_path(directory: Path, epoch: int) -> Path:
    return directory / f"ckpt-{epoch:06d}.pt"


def list_checkpoints(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    found = []
    for p in directory.iterdir():
        m = _NAME_RE.match(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


def save_checkpoint(directory: Path, epoch: int, payload: dict[str, Any], *, keep: int = 2) -> str:
    digest = save_payload(checkpoint_path(directory, epoch), payload)
    for old_epoch, old in list_checkpoints(directory)[:-keep]:
        if old_epoch != epoch:
            old.unlink(missing_ok=True)
            sidecar(old).unlink(missing_ok=True)
    return digest


RESTART_NOTE = "no usable checkpoint: training restarts from epoch 0"


def load_latest(directory: Path) -> tuple[tuple[int, dict[str, Any]] | None, list[str]]:
    """The newest checkpoint that verifies as (epoch, payload), or None; with a note naming each newer
    (or, when none verifies, every) checkpoint file that was skipped and why."""
    notes: list[str] = []
    for epoch, path in reversed(list_checkpoints(directory)):
        try:
            return (epoch, load_payload(path)), notes
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint falls back to the previous
            notes.append(f"skipped checkpoint {path.name} ({path.parent}): {_why(exc)}")
    return None, notes


def _why(exc: BaseException) -> str:
    if isinstance(exc, ValueError) and "no recorded SHA256" in str(exc):
        return "its SHA256 was never recorded (no sidecar beside it)"
    if isinstance(exc, ValueError) and "SHA256" in str(exc):
        return "its content does not match its recorded SHA256 (a torn or altered write)"
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or exc})"
    # The hash matched but torch cannot unpickle it: garbage written with a matching sidecar.
    return f"not a readable checkpoint ({type(exc).__name__}: {exc})"
