"""The resumable output of one extraction: a `<out>.parts/` folder of shards, then the one features file.

Images are cut into fixed shards of consecutive positions; each finished shard is written at once
(atomically: a temporary file renamed into place), so a killed or stopped run loses at most the shard in
progress. `run.json` holds everything the numbers depend on; a later run resumes only when it matches
exactly, and then recomputes nothing it has. Numpy only.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hierconsole.errors import InputError

IDENTITY_FILE = "run.json"


@dataclass(frozen=True)
class Shard:
    rows: np.ndarray  # int64 positions in the image list that gave features
    features: np.ndarray  # float32 [len(rows), D]
    failed_rows: np.ndarray  # int64 positions that could not be read
    failed_reasons: tuple[str, ...]


def parts_folder(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


def shard_ranges(n: int, shard_size: int) -> list[range]:
    return [range(start, min(start + shard_size, n)) for start in range(0, n, shard_size)]


class Parts:
    """The `.parts` folder of an output file."""

    def __init__(self, out: Path):
        self.out = out
        self.folder = parts_folder(out)

    def check(self, identity: dict) -> bool:
        """Whether a previous run with this identity left shards here (raises when one with another did)."""
        path = self.folder / IDENTITY_FILE
        if not path.is_file():
            return False
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            before = {}
        if before != identity:
            differ = sorted(k for k in set(before) | set(identity) if before.get(k) != identity.get(k))
            raise InputError(
                self.folder,
                "an unfinished extraction with other settings is here "
                f"(they differ in: {', '.join(differ) or 'its run.json is damaged'})",
                hint="rerun with the same options to resume it, or delete the folder to start again",
            )
        return True

    def start(self, identity: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / IDENTITY_FILE
        if not path.is_file():
            _atomic_text(path, json.dumps(identity, indent=2, sort_keys=True))

    def path(self, k: int) -> Path:
        return self.folder / f"shard-{k:05d}.npz"

    def done(self, n_shards: int) -> set[int]:
        """Shards already written and readable; a damaged one is removed so it is computed again."""
        found = set()
        for k in range(n_shards):
            path = self.path(k)
            if not path.is_file():
                continue
            try:
                self.read(k)
            except Exception:  # a damaged shard is recomputed, whatever numpy raised
                path.unlink()
                continue
            found.add(k)
        return found

    def write(self, k: int, shard: Shard) -> None:
        tmp = self.path(k).with_suffix(".tmp.npz")
        np.savez(
            tmp,
            rows=shard.rows.astype(np.int64),
            features=shard.features.astype(np.float32),
            failed_rows=shard.failed_rows.astype(np.int64),
            failed_reasons=np.array(shard.failed_reasons, dtype=np.str_),
        )
        os.replace(tmp, self.path(k))

    def read(self, k: int) -> Shard:
        with np.load(self.path(k), allow_pickle=False) as z:
            return Shard(
                z["rows"], z["features"], z["failed_rows"], tuple(str(r) for r in z["failed_reasons"])
            )

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def write_features(out: Path, ids: list[str], features: np.ndarray, manifest: dict) -> None:
    """The file `hierconsole import` reads (features + ids), the manifest inside it and beside it."""
    text = json.dumps(manifest, indent=2, sort_keys=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez(
        tmp, features=features.astype(np.float32), ids=np.array(ids, dtype=np.str_), manifest=np.array(text)
    )
    _atomic_text(manifest_path(out), text + "\n")
    os.replace(tmp, out)


def manifest_path(out: Path) -> Path:
    return out.with_name(out.stem + ".manifest.json")


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
