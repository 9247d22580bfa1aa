"""Reading, writing and comparing golden files (tests/golden/k3), exactly.

Every comparison is of bytes: JSON is compared as text written with `json.dumps` (which writes a float by
its repr, so a value round-trips exactly, NaN included), arrays by dtype, shape and raw bytes (so -0.0
and NaN payloads count), other files by their bytes. With WRITE_ENV set to 1 (tests/golden/capture.py)
the same calls write the files instead.
"""

from __future__ import annotations

import contextlib
import difflib
import gzip
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

WRITE_ENV = "HIERCONSOLE_WRITE_GOLDEN"
"""Set to 1 to (re)write the golden files instead of comparing with them: only on purpose."""
K3 = Path(__file__).parent / "k3"
"""The three-level goldens."""
WHOLE_LIMIT = 50_000
"""Files up to this size are stored as they are; larger ones gzipped (readable with zcat on a diff)."""
REGENERATE = "python -m tests.golden.capture"


def writing() -> bool:
    return os.environ.get(WRITE_ENV) == "1"


def _differs(path: Path, detail: str) -> AssertionError:
    return AssertionError(
        f"golden file {path.relative_to(K3.parent.parent.parent)} differs from what the current code computes: "
        f"{detail}\n(three-level results must stay bit-identical; regenerate with `{REGENERATE}` only on "
        "purpose, saying why in the commit)"
    )


def _missing(path: Path) -> AssertionError:
    return AssertionError(f"golden file {path} is missing: capture it with `{REGENERATE}`")


def _text_diff(old: str, new: str, path: Path) -> str:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "golden", "now", lineterm="", n=1))
    shown = "\n".join(lines[:40])
    return shown + (f"\n... {len(lines) - 40} more diff lines" if len(lines) > 40 else "")


def json_text(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, allow_nan=True) + "\n"


def check_json(name: str, value: Any) -> None:
    """`value` written as JSON text equals the stored k3/`name` character for character."""
    check_text(name, json_text(value))


def check_text(name: str, text: str) -> None:
    path = K3 / name
    if writing():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.is_file():
        raise _missing(path)
    stored = path.read_text(encoding="utf-8")
    if stored != text:
        raise _differs(path, "\n" + _text_diff(stored, text, path))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_file_bytes(name: str, data: bytes) -> None:
    """`data` equals the stored k3/`name` (k3/`name`.gz when larger than WHOLE_LIMIT)."""
    small = len(data) <= WHOLE_LIMIT
    path = K3 / (name if small else name + ".gz")
    if writing():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if small else gzip.compress(data, mtime=0))
        return
    if not path.is_file():
        raise _missing(path)
    stored = path.read_bytes() if small else gzip.decompress(path.read_bytes())
    if stored != data:
        detail = f"sha256 {sha256(stored)} stored, {sha256(data)} now"
        with contextlib.suppress(UnicodeDecodeError):  # a binary file: its hashes say enough
            detail += "\n" + _text_diff(stored.decode(), data.decode(), path)
        raise _differs(path, detail)


def check_arrays(name: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Each array equals the stored one in k3/`name` (.npz) in dtype, shape and every byte."""
    path = K3 / name
    arrays = {key: np.ascontiguousarray(a) for key, a in arrays.items()}
    if writing():
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_npz(path, arrays)
        return
    if not path.is_file():
        raise _missing(path)
    with np.load(path, allow_pickle=False) as stored:
        if sorted(stored.files) != sorted(arrays):
            raise _differs(path, f"arrays {sorted(stored.files)} stored, {sorted(arrays)} now")
        for key, now in arrays.items():
            old = stored[key]
            if old.dtype != now.dtype or old.shape != now.shape:
                raise _differs(
                    path, f"array {key!r}: {old.dtype}{old.shape} stored, {now.dtype}{now.shape} now"
                )
            if old.tobytes() != now.tobytes():
                diff = np.flatnonzero(old.reshape(-1).view(np.uint8) != now.reshape(-1).view(np.uint8))
                first = int(diff[0]) // max(1, old.itemsize)
                raise _differs(
                    path,
                    f"array {key!r} ({old.dtype}{old.shape}): {len(diff)} differing bytes; first at flat index "
                    f"{first}: {old.reshape(-1)[first]!r} stored, {now.reshape(-1)[first]!r} now",
                )


def _write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """np.savez_compressed's layout with a fixed date on every member, so that capturing twice writes
    the same bytes (numpy stamps the current time) and a regeneration shows in git only where a value moved."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, arrays[key], allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buffer.getvalue())
