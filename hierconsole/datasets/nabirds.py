"""NABirds directory import: the CUB file layout plus hierarchy.txt (`child parent` edges).

The three levels come from the native tree: Leaf = a class that images use, Parent = its direct parent,
Supergroup = the direct child of the root on its path (the root is the node without a parent). A leaf
whose parent is itself a child of the root has the same node as Parent and Supergroup; the taxonomy
summary reports that.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hierconsole.datasets.cub import (
    ImageDir,
    PairFile,
    class_order,
    read_features_for,
    read_image_dir,
    read_pair_file,
)
from hierconsole.datasets.features_io import with_extraction
from hierconsole.datasets.featureset import FeatureSet, source_hashes
from hierconsole.errors import InputError
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import NABIRDS_LEVEL_NAMES

_SHOWN = 20


def read_hierarchy(root: Path, class_ids: set[str], problems: list[str]) -> dict[str, str]:
    """child id -> parent id from hierarchy.txt; unknown ids and second parents go to `problems`."""
    edges = read_pair_file(root / "hierarchy.txt", ("child_id", "parent_id"), problems)
    if class_ids:
        for child, parent, line in zip(edges.keys, edges.values, edges.lines, strict=True):
            unknown = [
                f"{what} {v!r}" for what, v in (("child", child), ("parent", parent)) if v not in class_ids
            ]
            if unknown:
                problems.append(f"hierarchy.txt line {line}: {' and '.join(unknown)} not in classes.txt")
    return edges.mapping()


def leaf_paths(table: ImageDir, parent_of: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """Path leaf -> ... -> root for every class the images use, and the problems found on the way."""
    class_name = table.classes.mapping()
    paths: dict[str, list[str]] = {}
    problems: list[str] = []
    cycles: set[frozenset[str]] = set()
    for cid in class_order(set(table.class_ids)):
        path = [cid]
        while path[-1] in parent_of:
            nxt = parent_of[path[-1]]
            if nxt in path:
                loop = path[path.index(nxt) :]
                if frozenset(loop) not in cycles:
                    cycles.add(frozenset(loop))
                    problems.append(f"hierarchy.txt: a cycle through class ids {' -> '.join([*loop, nxt])}")
                break
            path.append(nxt)
        else:
            if len(path) == 1:
                problems.append(
                    f"class {class_name.get(cid, '?')!r} (id {cid}) is used by images but has no parent "
                    "in hierarchy.txt"
                )
            else:
                paths[cid] = path
    reach: dict[str, int] = {}
    for path in paths.values():
        reach[path[-1]] = reach.get(path[-1], 0) + 1
    if len(reach) > 1:
        shown = ", ".join(f"{r} {class_name.get(r, '?')!r} ({n} leaves)" for r, n in sorted(reach.items()))
        problems.append(
            f"hierarchy.txt: the leaves reach {len(reach)} different roots: {shown}; expected one tree"
        )
    else:
        for cid, path in paths.items():
            if len(path) == 2:
                problems.append(
                    f"class {class_name.get(cid, '?')!r} (id {cid}) hangs directly under the root "
                    f"{class_name.get(path[1], '?')!r}: it has no Parent group"
                )
    return {c: p for c, p in paths.items() if len(p) > 2}, problems


def display_names(table: ImageDir) -> dict[str, str]:
    """Class names from classes.txt, with ` [id]` added where two nodes share a name."""
    seen: dict[str, int] = {}
    for name in table.classes.values:
        seen[name] = seen.get(name, 0) + 1
    return {
        cid: (f"{name} [{cid}]" if seen[name] > 1 else name)
        for cid, name in zip(table.classes.keys, table.classes.values, strict=True)
    }


def read_nabirds_dir(root: str | Path) -> tuple[ImageDir, dict[str, list[str]]]:
    """The folder's image list and each used class's path to the root, with every check `import
    nabirds` makes before it reads the features (so `replicate` can refuse a folder before it starts)."""
    root = Path(root)
    parent_of: dict[str, str] = {}

    def check_hierarchy(problems: list[str], classes: PairFile) -> None:
        parent_of.update(read_hierarchy(root, set(classes.keys), problems))

    table = read_image_dir(root, extra=check_hierarchy)
    paths, problems = leaf_paths(table, parent_of)
    if problems:
        raise InputError(
            root / "hierarchy.txt", problems, hint="hierarchy.txt must form one tree over classes.txt"
        )
    return table, paths


def import_nabirds(
    root: str | Path,
    features_path: str | Path,
    *,
    name: str = "nabirds",
    level_names: tuple[str, ...] = NABIRDS_LEVEL_NAMES,
) -> FeatureSet:
    """A FeatureSet from a NABirds folder and a features file keyed by image UUID or image path.

    Rows follow images.txt; leaf indices follow class ids. Writes nothing; raises InputError listing every
    problem of the stage that failed.
    """
    root = Path(root)
    table, paths = read_nabirds_dir(root)
    names = display_names(table)
    leaves = list(paths)
    tax = Taxonomy.from_rows(
        [(names[c], names[paths[c][1]], names[paths[c][-2]]) for c in leaves],
        level_names=level_names,
        source=root / "hierarchy.txt",
    )
    x, scheme = read_features_for(table, features_path)
    leaf_of = {cid: i for i, cid in enumerate(leaves)}
    root_id = paths[leaves[0]][-1]
    return FeatureSet(
        name=name,
        features=x,
        ids=np.array(table.ids, dtype=object),
        leaf=np.array([leaf_of[c] for c in table.class_ids], dtype=np.int64),
        split=table.split,
        taxonomy=tax,
        kind="nabirds",
        sources=source_hashes(*table.files(), root / "hierarchy.txt", features_path),
        params={
            "root": str(root.resolve()),
            "features_keyed_by": scheme,
            "tree_root": {"id": root_id, "name": names[root_id]},
            "leaf_class_ids": leaves,
            **with_extraction(features_path),
        },
    )
