"""What travels between the home and a job that runs on another machine (a Ray node), without a shared
filesystem: the input files its spec names, and back, numbered batches of its event lines and of the
files of its job folder.

A batch carries the worker's event lines byte for byte, so the orchestrator's `events.jsonl` is the
file the worker wrote and is ingested by the same idempotent path as a local job's. Files travel at
checkpoint boundaries (a line of a `BOUNDARY_KINDS` kind, or the worker's exit): every file of the job
folder that changed since the last batch, and the removal of those that went (checkpoints pruned by
the trainer), so the home's copy of the folder is the worker's as of that checkpoint. Free of torch, of
Ray and of SQL: the node and the orchestrator both use it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hierconsole.contract import layout
from hierconsole.contract.durable import HASH_SIDECAR, write_atomically
from hierconsole.contract.events import EventKind

BOUNDARY_KINDS = frozenset(
    {EventKind.CHECKPOINT, EventKind.FINAL, EventKind.DONE, EventKind.FAILED, EventKind.CANCELLED}
)
"""Event kinds after which the job folder's files are sent home: the worker fsyncs them (`DURABLE`), as
they mark work a resumed run must find."""

NOT_MIRRORED = frozenset(
    {layout.SPEC, layout.EVENTS, layout.HEARTBEAT, layout.LOCK, layout.WORKER_LOG, layout.STOPPED, layout.EXECUTOR}
)
"""Files of a job folder that are not mirrored: the orchestrator writes the spec and its own copies of
events and log, the heartbeat and lock are the live process's own, the others are the orchestrator's."""

FileState = dict[str, tuple[int, int]]
"""relative path -> (size, mtime in ns) of a folder's mirrored files."""


class TransferError(ValueError):
    """A path that would leave the folder it is written into."""


@dataclass(frozen=True)
class FileCopy:
    """One file, by its path relative to a root (a home, or a job folder); `data` None: it was removed."""

    path: str
    data: bytes | None


@dataclass(frozen=True)
class Batch:
    """What a remote job sent since the previous batch. `seq` counts batches from 1; 0 is a beat that only
    says the job is alive (no lines, files or log)."""

    seq: int
    lines: bytes = b""
    """Event lines, exactly as the worker wrote them (complete lines; at the end, a torn last one too)."""
    files: tuple[FileCopy, ...] = ()
    log: bytes = b""
    """What the worker printed since the previous batch (worker.log)."""
    heartbeat_age: float | None = None
    """Seconds since the worker last touched its heartbeat, by the node's clock (None: not yet)."""
    ended: bool = False
    returncode: int | None = None

    @property
    def empty(self) -> bool:
        return not (self.lines or self.files or self.log or self.ended)


def _safe(root: Path, relative: str) -> Path:
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise TransferError(f"{relative!r}: a transferred path must be relative and stay inside {root}")
    return root.joinpath(*pure.parts)


def _mirrored(relative: PurePosixPath) -> bool:
    # Dot-files are temporaries of atomic writes (`.<name>.tmp-<pid>`): the renamed file is what counts.
    if any(part.startswith(".") for part in relative.parts):
        return False
    return not (len(relative.parts) == 1 and relative.name in NOT_MIRRORED)


def folder_state(folder: Path) -> FileState:
    """The mirrored files of a job folder, by relative path."""
    state: FileState = {}
    if not folder.is_dir():
        return state
    for path in folder.rglob("*"):
        relative = PurePosixPath(path.relative_to(folder).as_posix())
        if not _mirrored(relative):
            continue
        try:
            st = path.stat()
        except FileNotFoundError:
            continue  # removed while we looked: the next scan sees it gone
        if path.is_file():
            state[relative.as_posix()] = (st.st_size, st.st_mtime_ns)
    return state


def _sidecars_first(relative: str) -> tuple[bool, str]:
    # Written in this order at home, a file's hash is in place before the file (as the worker wrote them).
    return (not relative.endswith(HASH_SIDECAR), relative)


def changes(folder: Path, known: FileState) -> tuple[list[FileCopy], FileState]:
    """The files of `folder` that are new or changed since `known`, and those that went; with the state
    they were read at. A file replaced while it is read is read whole either way (writes are atomic)."""
    now = folder_state(folder)
    copies: list[FileCopy] = []
    for relative in sorted(now, key=_sidecars_first):
        seen = now[relative]
        if known.get(relative) == seen:
            continue
        try:
            data = (folder / relative).read_bytes()
        except FileNotFoundError:
            del now[relative]
            continue
        copies.append(FileCopy(relative, data))
    copies.extend(FileCopy(relative, None) for relative in sorted(set(known) - set(now)))
    return copies, now


def pack(root: Path, relatives: Iterable[str]) -> list[FileCopy]:
    """The files at `relatives` under `root` (a folder brings everything under it), for `unpack` elsewhere."""
    out: list[FileCopy] = []
    for relative in relatives:
        path = _safe(root, relative)
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                out.append(FileCopy(PurePosixPath(file.relative_to(root).as_posix()).as_posix(), file.read_bytes()))
        else:
            out.append(FileCopy(relative, path.read_bytes()))
    return out


def unpack(root: Path, copies: Iterable[FileCopy]) -> None:
    """Write (or remove) each copy under `root`."""
    for copy in copies:
        path = _safe(root, copy.path)
        if copy.data is None:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        else:
            write_atomically(path, copy.data)


def has_boundary(lines: bytes) -> bool:
    """Whether any complete event line is of a `BOUNDARY_KINDS` kind (malformed lines are not)."""
    for raw in lines.split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("kind") in BOUNDARY_KINDS:
            return True
    return False
