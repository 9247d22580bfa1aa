"""Datasets as the front ends show them: the catalogue and each taxonomy's summary."""

from __future__ import annotations

from hierconsole.errors import NotFoundError
from hierconsole.study.db.catalog import DatasetInfo, get_dataset, list_datasets, load_dataset
from hierconsole.study.db.storage import Store
from hierconsole.taxonomy import Taxonomy

__all__ = ["DatasetInfo", "dataset_taxonomy", "get_dataset", "list_datasets", "taxonomy_lines"]


def taxonomy_lines(store: Store, dataset_id: str) -> list[str]:
    """The taxonomy summary of a registered dataset, rebuilt from its stored rows (one per leaf: the
    names of its ancestors at every level, leaf first)."""
    names = store.one("SELECT level_names FROM datasets WHERE dataset_id = ?", [dataset_id])
    rows = _taxonomy_rows(store, dataset_id)
    if names is None or not rows:
        raise NotFoundError(f"dataset {dataset_id!r} has no stored taxonomy")
    tax = Taxonomy.from_rows(rows, level_names=tuple(names[0]), source=f"dataset {dataset_id}")
    return tax.summary().lines()


def _taxonomy_rows(store: Store, dataset_id: str) -> list[tuple[str, ...]]:
    """Each leaf's names at every level, leaf first, in leaf order (`taxonomy_nodes.path`)."""
    return [
        tuple(path)
        for (path,) in store.rows("SELECT path FROM taxonomy_nodes WHERE dataset_id = ? ORDER BY leaf_index", [dataset_id])
    ]


def dataset_taxonomy(store: Store, dataset_id: str) -> Taxonomy:
    """A registered dataset's taxonomy as it was imported (display names included), from its folder: the
    one `hierconsole taxonomy DATASET` shows with its hash."""
    return load_dataset(store, dataset_id).taxonomy
