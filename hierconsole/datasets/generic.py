"""Generic import: a features file, a labels CSV (`id,leaf[,split]`) and a taxonomy CSV.

The taxonomy CSV has one column per level, leaf first, 2 to 12 levels: its header names the levels
(`species,genus,family,order`), or is the three-level `leaf,middle,high` (other columns ignored).
`level_names` gives display names: for the three-level layout the three levels', else one per header
column, in order.

Rows follow the labels CSV. Without a split column every sample is `train` (a dataset without an
official split is studied with a generated split, e.g. hierarchy-disjoint).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hierconsole.csv_input import read_csv_records
from hierconsole.datasets.features_io import align_rows, read_features, with_extraction
from hierconsole.datasets.featureset import SPLIT_NAMES, FeatureSet, source_hashes
from hierconsole.errors import InputError
from hierconsole.levels import PAPER_CODES
from hierconsole.taxonomy import Taxonomy, read_taxonomy_rows

SPLIT_VALUES = {"train": 0, "training": 0, "val": 1, "valid": 1, "validation": 1, "test": 2}
_SHOWN = 20


def read_labels_csv(
    path: Path, tax: Taxonomy, taxonomy_csv: Path
) -> tuple[list[str], np.ndarray, np.ndarray, list[int], bool]:
    """(ids, leaf indices, split codes, line numbers, whether a split column exists), checked in full."""
    header, records = read_csv_records(path, "the labels CSV")
    cols = [c.strip().lower() for c in header or []]
    missing = [c for c in ("id", "leaf") if c not in cols]
    if missing:
        raise InputError(
            path,
            f"line 1: missing column {', '.join(missing)} (header is {','.join(header or [])!r})",
            hint="the first line must be the header id,leaf or id,leaf,split",
        )
    i_id, i_leaf = cols.index("id"), cols.index("leaf")
    i_split = cols.index("split") if "split" in cols else None
    leaf_index = tax.leaf_index()
    problems: list[str] = []
    ids: list[str] = []
    leaves: list[int] = []
    splits: list[int] = []
    lines: list[int] = []
    first: dict[str, int] = {}
    absent: dict[str, list[int]] = {}
    used: set[int] = set()
    for line, rec in records:
        if not any(cell.strip() for cell in rec):
            continue
        cell = [c.strip() for c in rec]

        def get(i: int | None, cell: list[str] = cell) -> str:
            return cell[i] if i is not None and i < len(cell) else ""

        sid, leaf, split = get(i_id), get(i_leaf), get(i_split)
        bad = False
        if not sid:
            problems.append(f"row {line}: empty id")
            bad = True
        elif sid in first:
            problems.append(f"row {line}: id {sid!r} repeats row {first[sid]}")
            bad = True
        if not leaf:
            problems.append(f"row {line}: empty leaf")
            bad = True
        elif leaf not in leaf_index:
            absent.setdefault(leaf, []).append(line)
            bad = True
        else:
            used.add(leaf_index[leaf])
        if i_split is not None and split.lower() not in SPLIT_VALUES:
            problems.append(f"row {line}: split {split!r} is not one of {', '.join(SPLIT_NAMES)}")
            bad = True
        if bad:
            continue
        first[sid] = line
        ids.append(sid)
        leaves.append(leaf_index[leaf])
        splits.append(SPLIT_VALUES[split.lower()] if i_split is not None else 0)
        lines.append(line)
    for leaf, rows in list(absent.items())[:_SHOWN]:
        shown = ", ".join(map(str, rows[:5])) + (" ..." if len(rows) > 5 else "")
        problems.append(
            f"leaf {leaf!r} (row{'s' if len(rows) > 1 else ''} {shown}) is not in {taxonomy_csv.name}"
        )
    if len(absent) > _SHOWN:
        problems.append(f"... {len(absent) - _SHOWN} more leaves missing from {taxonomy_csv.name}")
    empty = [name for i, name in enumerate(tax.leaves) if i not in used]
    if empty:
        shown = ", ".join(map(repr, empty[:_SHOWN])) + (" ..." if len(empty) > _SHOWN else "")
        problems.append(
            f"{len(empty)} leaves of {taxonomy_csv.name} have no rows here (no samples): {shown}; "
            f"remove them from {taxonomy_csv.name} or add their samples"
        )
    if not ids and not problems:
        problems.append("no rows below the header")
    if problems:
        raise InputError(
            path, problems, hint="each row is id,leaf[,split] with a leaf named in the taxonomy CSV"
        )
    return ids, np.array(leaves, dtype=np.int64), np.array(splits, dtype=np.int8), lines, i_split is not None


def load_levels_csv(path: Path, *, level_names: Sequence[str] | None = None) -> Taxonomy:
    """The taxonomy of a CSV whose header names its levels (or holds `leaf,middle,high`), with `level_names`
    (if given) as the display names, one per level in order. The file is read once."""
    table = read_taxonomy_rows(path)
    if level_names is not None:
        header = table.level_names or PAPER_CODES
        if len(level_names) != len(header):
            raise InputError(
                path,
                f"--level-names gives {len(level_names)} names ({','.join(level_names)}) but the header names "
                f"{len(header)} levels ({','.join(header)})",
                hint="give one display name per taxonomy column, leaf first, or leave --level-names out",
            )
    names = tuple(level_names) if level_names is not None else table.level_names
    return Taxonomy.from_rows(table.rows, level_names=names, source=path, row_numbers=table.numbers)


def import_generic(
    features_path: str | Path,
    labels_csv: str | Path,
    taxonomy_csv: str | Path,
    *,
    name: str,
    level_names: Sequence[str] | None = None,
    expected_dim: int | None = None,
) -> FeatureSet:
    """A FeatureSet from generic files. Feature rows match label rows by id, or by order when the features
    file has no ids (then the counts must match). Writes nothing."""
    features_path, labels_csv, taxonomy_csv = Path(features_path), Path(labels_csv), Path(taxonomy_csv)
    tax = load_levels_csv(taxonomy_csv, level_names=level_names)
    ids, leaf, split, lines, has_split = read_labels_csv(labels_csv, tax, taxonomy_csv)
    feature_ids, x = read_features(features_path, expected_dim=expected_dim)
    order, scheme = align_rows(
        features_path,
        feature_ids,
        len(x),
        {"id": ids},
        listing=labels_csv.name,
        describe=lambda i: f"id {ids[i]!r} ({labels_csv.name} row {lines[i]})",
    )
    return FeatureSet(
        name=name,
        features=x[order],
        ids=np.array(ids, dtype=object),
        leaf=leaf,
        split=split,
        taxonomy=tax,
        kind="generic",
        sources=source_hashes(features_path, labels_csv, taxonomy_csv),
        params={"features_keyed_by": scheme, "split_column": has_split, **with_extraction(features_path)},
    )
