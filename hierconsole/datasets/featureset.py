"""FeatureSet: frozen image features with sample ids, leaf labels, the official split and the taxonomy.

A saved set is a folder: features.npy, the sample table (ids, leaf labels, split codes) as samples.npz
and samples.parquet, taxonomy.csv and manifest.json. The two sample tables hold the same columns: the npz
one is what a worker reads (numpy alone, so workers run where only torch, numpy and geoopt are
installed, as on a GPU machine that takes no other packages), the parquet one is for people and other
tools, written wherever polars is installed (always, in a full install). Folders saved before the npz
table existed are read from the parquet one. Whichever table is read, the content hash in the manifest
must match what was loaded.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hierconsole.errors import InputError
from hierconsole.taxonomy import Taxonomy, load_taxonomy_csv

SPLIT_NAMES: tuple[str, str, str] = ("train", "val", "test")
"""Official split codes: an int8 split value is an index into this tuple."""

FORMAT_VERSION = 1
"""The folder layout of three-level sets (taxonomy.csv header leaf,middle,high; taxonomy_order middles/highs)."""
DEEP_FORMAT_VERSION = 2
"""The layout of any other depth: taxonomy.csv headed by the level codes, taxonomy_order.levels."""
SAMPLES_NPZ, SAMPLES_PARQUET = "samples.npz", "samples.parquet"
KINDS = ("generic", "cub", "nabirds", "synthetic", "inat")


@dataclass(eq=False)
class FeatureSet:
    name: str
    features: np.ndarray
    ids: np.ndarray
    leaf: np.ndarray
    split: np.ndarray
    taxonomy: Taxonomy
    kind: str
    sources: dict[str, str] = field(default_factory=dict)
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.features = np.ascontiguousarray(self.features, dtype=np.float32)
        self.ids = np.array([str(x) for x in self.ids], dtype=object)
        self.leaf = np.asarray(self.leaf, dtype=np.int64).reshape(-1)
        self.split = np.asarray(self.split, dtype=np.int8).reshape(-1)
        n = len(self.ids)
        problems = []
        if self.kind not in KINDS:
            problems.append(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.features.ndim != 2 or self.features.shape[0] != n:
            problems.append(f"features have shape {self.features.shape}, expected ({n}, D)")
        elif not np.isfinite(self.features).all():
            problems.append("features hold NaN or infinite values")
        if len(self.leaf) != n or len(self.split) != n:
            problems.append(f"{n} ids, {len(self.leaf)} leaf labels and {len(self.split)} split codes")
        if len(set(self.ids.tolist())) != n:
            problems.append("ids are not unique")
        if n and (self.leaf.min() < 0 or self.leaf.max() >= self.taxonomy.n_leaves):
            problems.append("leaf labels outside the taxonomy")
        if n and (self.split.min() < 0 or self.split.max() >= len(SPLIT_NAMES)):
            problems.append("split codes outside 0..2")
        if problems:
            raise InputError(f"feature set {self.name!r}", problems)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def labels(self) -> np.ndarray:
        """[N, K] int64: each sample's ancestor index at every level, leaf first."""
        return self.taxonomy.labels(self.leaf)

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    def split_counts(self) -> dict[str, int]:
        counts = np.bincount(self.split, minlength=len(SPLIT_NAMES))
        return {name: int(c) for name, c in zip(SPLIT_NAMES, counts, strict=True)}

    def sha256(self) -> str:
        """Content hash over shape, feature bytes, ids, leaf labels, split codes and the taxonomy hash."""
        h = hashlib.sha256()
        h.update(np.array(self.features.shape, dtype="<i8").tobytes())
        h.update(self.features.astype("<f4", copy=False).tobytes())
        h.update(json.dumps(self.ids.tolist(), ensure_ascii=False).encode("utf-8"))
        h.update(self.leaf.astype("<i8", copy=False).tobytes())
        h.update(self.split.astype("i1", copy=False).tobytes())
        h.update(self.taxonomy.sha256().encode("ascii"))
        return h.hexdigest()

    def save(self, directory: str | Path) -> None:
        """Write features.npy, the sample tables, taxonomy.csv and manifest.json atomically.

        Files go to a sibling temporary folder, are fsynced, and the folder is renamed into place, so a
        reader sees either the old set or the new one, never a half-written one. An existing folder is
        replaced.
        """
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = directory.parent / f".{directory.name}.tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            with (tmp / "features.npy").open("wb") as fh:
                np.save(fh, self.features, allow_pickle=False)
            _write_samples_npz(tmp / SAMPLES_NPZ, self.ids, self.leaf, self.split)
            try:
                _write_samples_parquet(tmp / SAMPLES_PARQUET, self.ids, self.leaf, self.split)
            except ModuleNotFoundError as exc:  # a worker-only installation: the npz table serves it
                if exc.name != "polars":
                    raise
            with (tmp / "taxonomy.csv").open("w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh, lineterminator="\n")
                # The level codes: `leaf,middle,high` for three levels, as every set saved before.
                writer.writerow(list(self.taxonomy.levels.codes))
                writer.writerows(self.taxonomy.rows())
            manifest = {
                "format_version": FORMAT_VERSION if self.taxonomy.k == 3 else DEEP_FORMAT_VERSION,
                "name": self.name,
                "kind": self.kind,
                "n": len(self),
                "dim": self.dim,
                "level_names": list(self.taxonomy.level_names),
                "taxonomy_order": _taxonomy_order(self.taxonomy),
                "split_names": list(SPLIT_NAMES),
                "sources": self.sources,
                "params": self.params,
                "sha256": self.sha256(),
            }
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False), "utf-8")
            for f in tmp.iterdir():
                _fsync(f)
            _fsync(tmp)
            old = None
            if directory.exists():
                old = directory.parent / f".{directory.name}.old-{uuid.uuid4().hex}"
                os.replace(directory, old)
            os.replace(tmp, directory)
            _fsync(directory.parent)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, directory: str | Path, *, expect_sha256: str | None = None) -> FeatureSet:
        """Read a saved set and check it against the hash in its manifest, and against `expect_sha256`
        (the content a study was created with) when given."""
        directory = Path(directory)
        try:
            manifest = json.loads((directory / "manifest.json").read_text("utf-8"))
            features = np.load(directory / "features.npy", allow_pickle=False)
            ids, leaf, split = _read_samples(directory)
        except (OSError, ValueError, KeyError) as exc:
            raise InputError(directory, f"not a readable feature set: {exc}") from exc
        if manifest.get("format_version", FORMAT_VERSION) > DEEP_FORMAT_VERSION:
            raise InputError(
                directory,
                f"feature set format {manifest['format_version']} is newer than this hierconsole reads "
                f"({DEEP_FORMAT_VERSION})",
                hint="upgrade hierconsole, or import the dataset again with this version",
            )
        tax = load_taxonomy_csv(directory / "taxonomy.csv", level_names=manifest["level_names"])
        order = manifest.get("taxonomy_order")
        if order:
            # Three-level sets name their two orders; deeper ones list every level above the leaf.
            levels = order["levels"] if "levels" in order else [order["middles"], order["highs"]]
            tax = _reorder(tax, levels)
        fs = cls(
            name=manifest["name"],
            features=features,
            ids=ids,
            leaf=leaf,
            split=split,
            taxonomy=tax,
            kind=manifest["kind"],
            sources=manifest.get("sources", {}),
            params=manifest.get("params", {}),
        )
        if fs.sha256() != manifest["sha256"]:
            raise InputError(
                directory,
                "content does not match the sha256 in manifest.json",
                hint="the files were changed or damaged after saving; import the dataset again",
            )
        if expect_sha256 is not None and manifest["sha256"] != expect_sha256:
            raise InputError(
                directory,
                f"this is not the data the study was created with: its content hash is "
                f"{manifest['sha256'][:12]}, the study's is {expect_sha256[:12]} (the dataset was replaced)",
                hint="re-import the original features under the same name, or start a new study on this data",
            )
        return fs


def _write_samples_npz(path: Path, ids: np.ndarray, leaf: np.ndarray, split: np.ndarray) -> None:
    # Fixed-width unicode, so the file loads without pickle; numpy drops trailing NULs from such strings,
    # which the content hash would then refuse, so ids ending in one are left to the parquet table.
    names = ids.tolist()
    if any(name.endswith("\x00") for name in names):
        return
    with path.open("wb") as fh:
        np.savez(fh, id=np.array(names, dtype=np.str_), leaf=leaf, split=split)


def _write_samples_parquet(path: Path, ids: np.ndarray, leaf: np.ndarray, split: np.ndarray) -> None:
    import polars as pl

    pl.DataFrame(
        {
            "id": pl.Series(ids.tolist(), dtype=pl.String),
            "leaf": pl.Series(leaf, dtype=pl.Int64),
            "split": pl.Series(split, dtype=pl.Int8),
        }
    ).write_parquet(path)


def _read_samples(directory: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, leaf, split) from the npz table, or from the parquet one in folders that have no npz."""
    if (directory / SAMPLES_NPZ).exists():
        with np.load(directory / SAMPLES_NPZ, allow_pickle=False) as z:
            return z["id"].astype(object), z["leaf"], z["split"]
    import polars as pl

    samples = pl.read_parquet(directory / SAMPLES_PARQUET)
    return np.array(samples["id"].to_list(), dtype=object), samples["leaf"].to_numpy(), samples["split"].to_numpy()


def _taxonomy_order(tax: Taxonomy) -> dict[str, list]:
    """The manifest's record of each level's index order above the leaf (the CSV rows give the leaves')."""
    if tax.k == 3:
        return {"middles": list(tax.nodes[1]), "highs": list(tax.nodes[2])}
    return {"levels": [list(level) for level in tax.nodes[1:]]}


def _reorder(tax: Taxonomy, orders: list[list[str]]) -> Taxonomy:
    """Restore the index order of every level above the leaf, which a shuffled taxonomy need not share
    with its CSV rows (read in order of first appearance). `orders[j]` lists level j+1's names."""
    if len(orders) != tax.k - 1:
        raise InputError("manifest.json", "taxonomy_order does not match taxonomy.csv")
    # parent_of[j][name]: the level-(j+1) name above level j's node `name` in the CSV's tree.
    parent_of = [
        {child: tax.nodes[j + 1][p] for child, p in zip(tax.nodes[j], tax.parents[j].tolist(), strict=True)}
        for j in range(tax.k - 1)
    ]
    for j, names in enumerate(orders):
        if set(names) != set(tax.nodes[j + 1]) or len(names) != len(tax.nodes[j + 1]):
            raise InputError("manifest.json", "taxonomy_order does not match taxonomy.csv")
    nodes = (tax.nodes[0], *(tuple(names) for names in orders))
    index = [{name: i for i, name in enumerate(level)} for level in nodes]
    parents = tuple(
        np.array([index[j + 1][parent_of[j][name]] for name in nodes[j]], dtype=np.int64)
        for j in range(tax.k - 1)
    )
    return Taxonomy(nodes, parents, tax.level_names)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_hashes(*paths: str | Path) -> dict[str, str]:
    """Input file path -> sha256, as recorded in FeatureSet.sources."""
    return {str(Path(p).resolve()): file_sha256(p) for p in paths}
