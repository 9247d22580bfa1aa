"""Content hashes of a replication's external inputs: what its stages are keyed by.

A folder's hash covers every file's relative path and bytes, in sorted order, so a changed, added or
removed image changes it and nothing else (not a file's time or the folder's location) does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        digest.update(rel.encode() + b"\0" + file_sha256(path).encode() + b"\n")
    return digest.hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
