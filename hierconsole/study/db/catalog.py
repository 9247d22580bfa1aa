"""Datasets registered in the store: the rows in DuckDB and the self-contained artifact folder beside it.

Workers never open DuckDB, so every dataset is also saved as a folder they can load on their own
(`FeatureSet.load`). A registration either lands completely (folder and rows) or not at all. The rows
name the folder relative to the home (`locations`), so a home can move.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hierconsole.datasets import SPLIT_NAMES, FeatureSet
from hierconsole.datasets.synthetic import BUILT_IN
from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.levels import LevelPlan, Levels
from hierconsole.locations import dataset_dir, inside_home, relative, resolve
from hierconsole.names import check_name
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import SYNTHETIC_PREFIX

if TYPE_CHECKING:
    import duckdb  # write callbacks are handed a connection by Store.write


@dataclass(frozen=True)
class DatasetInfo:
    dataset_id: str
    kind: str
    n_samples: int
    dim: int
    n_leaf: int
    n_train: int
    n_val: int
    n_test: int
    level_names: tuple[str, ...]
    sha256: str
    artifact_dir: Path
    """The dataset's folder on this machine."""
    level_codes: tuple[str, ...]
    level_counts: tuple[int, ...]
    """Nodes at each level, leaf first (`dataset_levels.n_groups`)."""

    @property
    def levels(self) -> Levels:
        """The dataset's levels, leaf first (codes and display names), as `dataset_levels` records them."""
        return Levels(self.level_codes, self.level_names)


def check_dataset_id(dataset_id: str) -> str:
    """The rule of every name; the CLI checks `--name` before reading any file, this catches the rest."""
    return check_name(dataset_id, "dataset name")


def register_dataset(store: Store, fs: FeatureSet, *, replace: bool = False) -> DatasetInfo:
    """Save `fs` under the home folder and record it. Nothing is left behind if any step fails."""
    dataset_id = check_dataset_id(fs.name)
    existing = store.one("SELECT sha256 FROM datasets WHERE dataset_id = ?", [dataset_id])
    if existing and existing[0] == fs.sha256():
        return get_dataset(store, dataset_id)
    if existing and not replace:
        raise HierconsoleError(
            f"a different dataset named {dataset_id!r} is already in the store; choose another --name, "
            "or delete the old one first"
        )
    if existing:
        _refuse_if_used(store, dataset_id, "replace")
    target = dataset_dir(store.home, dataset_id)
    staging = target.with_name(f".{dataset_id}.incoming")
    if staging.exists():
        shutil.rmtree(staging)
    fs.save(staging)
    try:
        store.write(lambda con: _insert_rows(con, store.home, fs, target))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # The rows point at `target`; swap the folder in only now that they are committed.
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return get_dataset(store, dataset_id)


def _insert_rows(con: duckdb.DuckDBPyConnection, home: Path, fs: FeatureSet, target: Path) -> None:
    """The dataset's rows (replacing any of the same name), naming its folder `target`."""
    dataset_id = fs.name
    tax = fs.taxonomy
    levels = tax.levels
    counts = np.bincount(fs.split, minlength=len(SPLIT_NAMES))
    for table in _DATASET_TABLES:
        con.execute(f"DELETE FROM {table} WHERE dataset_id = ?", [dataset_id])
    con.execute(
        "INSERT INTO datasets (dataset_id, kind, n_samples, dim, n_leaf, n_train, "
        "n_val, n_test, level_names, sha256, taxonomy_sha256, artifact_dir, sources, params) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            dataset_id,
            fs.kind,
            int(fs.features.shape[0]),
            int(fs.dim),
            tax.counts[0],
            int(counts[SPLIT_NAMES.index("train")]),
            int(counts[SPLIT_NAMES.index("val")]),
            int(counts[SPLIT_NAMES.index("test")]),
            list(tax.level_names),
            fs.sha256(),
            tax.sha256(),
            relative(home, target),
            json.dumps(fs.sources, sort_keys=True),
            json.dumps(fs.params, sort_keys=True, default=str),
        ],
    )
    con.executemany(
        "INSERT INTO dataset_levels VALUES (?, ?, ?, ?, ?)",
        [
            (dataset_id, i, code, name, n)
            for i, (code, name, n) in enumerate(zip(levels.codes, levels.names, tax.counts, strict=True), start=1)
        ],
    )
    con.executemany(
        "INSERT INTO taxonomy_nodes VALUES (?, ?, ?)", [(dataset_id, i, list(row)) for i, row in enumerate(tax.rows())]
    )


_DATASET_TABLES = ("datasets", "dataset_levels", "taxonomy_nodes")
"""Every table holding a dataset's rows (by `dataset_id`)."""


def restore_dataset(store: Store, folder: Path) -> str:
    """Record a dataset folder the store has no rows for (`doctor --repair` rebuilding from a backup taken
    before its registration): the folder is self-contained, so its rows are what the registration wrote
    (but the time). Its id."""
    fs = FeatureSet.load(folder)
    check_dataset_id(fs.name)
    if fs.name != folder.name:  # a copy beside it (`cp -r cub cub.old`) must not take the rows of `cub`
        raise HierconsoleError(f"its manifest names the dataset {fs.name!r}, not its folder's name {folder.name!r}")
    store.write(lambda con: _insert_rows(con, store.home, fs, folder))
    return fs.name


def _info(home: Path, row: dict) -> DatasetInfo:
    return DatasetInfo(
        dataset_id=row["dataset_id"],
        kind=row["kind"],
        n_samples=row["n_samples"],
        dim=row["dim"],
        n_leaf=row["n_leaf"],
        n_train=row["n_train"],
        n_val=row["n_val"],
        n_test=row["n_test"],
        # A row without level rows (crafted, or damaged) still lists and deletes; only its levels fail.
        level_names=tuple(row["level_names"] or ()),
        sha256=row["sha256"],
        artifact_dir=resolve(home, row["artifact_dir"]),
        level_codes=tuple(row["level_codes"] or ()),
        level_counts=tuple(int(n) for n in row["level_counts"] or ()),
    )


def _level_list(column: str) -> str:
    return f"(SELECT list(l.{column} ORDER BY l.position) FROM dataset_levels l WHERE l.dataset_id = d.dataset_id)"


_COLUMNS = (
    "d.dataset_id, d.kind, d.n_samples, d.dim, d.n_leaf, d.n_train, d.n_val, d.n_test, d.sha256, d.artifact_dir, "
    f"{_level_list('name')} AS level_names, {_level_list('code')} AS level_codes, "
    f"{_level_list('n_groups')} AS level_counts"
)
"""A dataset's row with its levels (names, codes and node counts, leaf first) from `dataset_levels`."""


def list_datasets(store: Store) -> list[DatasetInfo]:
    return [_info(store.home, r) for r in store.dicts(f"SELECT {_COLUMNS} FROM datasets d ORDER BY d.created_at")]


def get_dataset(store: Store, dataset_id: str) -> DatasetInfo:
    rows = store.dicts(f"SELECT {_COLUMNS} FROM datasets d WHERE d.dataset_id = ?", [dataset_id])
    if not rows:
        known = ", ".join(d.dataset_id for d in list_datasets(store)) or "none yet"
        raise NotFoundError(
            f"no dataset {dataset_id!r} in the store (known: {known}); import one with "
            "`hierconsole import ...` or `hierconsole demo`"
        )
    return _info(store.home, rows[0])


def dataset_levels(store: Store, dataset_id: str) -> Levels:
    """The levels of a registered dataset, leaf first, as `dataset_levels` records them."""
    return get_dataset(store, dataset_id).levels


def study_levels(store: Store, study_id: str) -> LevelPlan:
    """Which levels a study trains on and which its hier score averages, as its creation recorded them
    (`study_levels`; the migration to store version 7 recorded the plan every earlier study had)."""
    row = store.one("SELECT dataset_id FROM studies WHERE study_id = ?", [study_id])
    if row is None:
        raise NotFoundError(f"no study {study_id!r} in the store")
    levels = dataset_levels(store, row[0])
    rows = store.rows(
        "SELECT code, trained, in_hier FROM study_levels WHERE study_id = ? ORDER BY position", [study_id]
    )
    if [code for code, *_ in rows] != list(levels.codes):
        raise HierconsoleError(
            f"study {study_id}: its recorded levels ({', '.join(c for c, *_ in rows) or 'none'}) are not its "
            f"dataset's ({levels.describe()}); the store is damaged: run `hierconsole doctor`"
        )
    return LevelPlan(
        levels,
        hier=tuple(code for code, _, in_hier in rows if in_hier),
        trained=tuple(code for code, trained, _ in rows if trained),
    )


def load_dataset(store: Store, dataset_id: str) -> FeatureSet:
    return FeatureSet.load(get_dataset(store, dataset_id).artifact_dir)


def _refuse_if_used(store: Store, dataset_id: str, action: str) -> None:
    """Studies' runs, audits and any resumed job depend on the exact data: it stays while one uses it."""
    used = [
        r[0]
        for r in store.rows("SELECT study_id FROM studies WHERE dataset_id = ? ORDER BY created_at", [dataset_id])
    ]
    if used:
        raise HierconsoleError(
            f"cannot {action} dataset {dataset_id!r}: {len(used)} studies use it ({', '.join(used)}); "
            f"import the new data under another --name, or delete those studies first (`hierconsole delete STUDY`)"
        )


def delete_dataset(store: Store, dataset_id: str) -> None:
    """Remove a dataset's rows and folder; refused while any study uses it (its runs depend on the data)."""
    info = get_dataset(store, dataset_id)
    _refuse_if_used(store, dataset_id, "delete")
    folder = inside_home(store.home, info.artifact_dir, f"dataset {dataset_id}")

    def delete(con) -> None:
        for table in _DATASET_TABLES:
            con.execute(f"DELETE FROM {table} WHERE dataset_id = ?", [dataset_id])

    store.write(delete)
    shutil.rmtree(folder, ignore_errors=True)


def registered_dataset(store: Store, ref: str) -> str:
    """The dataset id a preset names, which must already be in the store (a dry run registers nothing;
    built-in synthetic data is registered by its first real run)."""
    if ref.startswith(SYNTHETIC_PREFIX) and ref[len(SYNTHETIC_PREFIX) :] in BUILT_IN:
        name = BUILT_IN[ref[len(SYNTHETIC_PREFIX) :]].name
        if store.one("SELECT 1 FROM datasets WHERE dataset_id = ?", [name]) is None:
            raise NotFoundError(
                f"built-in dataset {ref!r} is generated by its first run, not by a dry run; "
                "run the preset once (or `hierconsole demo`), then dry-run it"
            )
        return name
    return get_dataset(store, ref).dataset_id


def ensure_dataset(store: Store, ref: str) -> str:
    """The dataset id a preset names; built-in synthetic data ("synthetic:demo") is generated on first use."""
    if not ref.startswith(SYNTHETIC_PREFIX):
        return get_dataset(store, ref).dataset_id
    from hierconsole.datasets import make_synthetic

    which = ref[len(SYNTHETIC_PREFIX) :]
    if which not in BUILT_IN:
        raise NotFoundError(f"no built-in synthetic dataset {which!r}; choose one of {sorted(BUILT_IN)}")
    name = BUILT_IN[which].name
    if store.one("SELECT 1 FROM datasets WHERE dataset_id = ?", [name]) is None:
        register_dataset(store, make_synthetic(BUILT_IN[which]))
    return name
