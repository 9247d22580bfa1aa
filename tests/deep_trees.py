"""K-level trees and data for tests of any taxonomy depth (2 to 12 levels), shared by every package.

- `deep_rows(k, n_leaves, rng)`: taxonomy rows (K names, leaf first) of a random tree whose levels
  shrink towards the top, so every level above the leaf has valid strict queries.
- `deep_featureset(k, ...)`: a small in-memory FeatureSet on such a tree.
- `write_inat_json(path, ...)`: an iNaturalist-style COCO annotation file (`images`, `annotations`,
  `categories` with the 2021 rank fields, or the 2018 / 2017 ones) for `import inat`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hierconsole.datasets.featureset import FeatureSet
from hierconsole.taxonomy import Taxonomy

INAT_RANKS: tuple[str, ...] = ("species", "genus", "family", "order", "class", "phylum", "kingdom")
"""iNaturalist's seven ranks, leaf first (2021 and 2018 category fields; `name` holds the species)."""


def level_sizes(k: int, n_leaves: int) -> list[int]:
    """Nodes per level, leaf first: shrinking geometrically from n_leaves to 2 at the top, each level
    strictly smaller than the one below (so no level repeats the one beneath it)."""
    if n_leaves < k + 1:
        raise ValueError(f"a {k}-level tree whose levels shrink to 2 needs at least {k + 1} leaves")
    sizes = [n_leaves]
    for j in range(1, k):
        ideal = round(n_leaves * (2 / n_leaves) ** (j / (k - 1)))
        sizes.append(max(2 + (k - 1 - j), min(sizes[-1] - 1, ideal)))
    return sizes


def deep_rows(
    k: int, n_leaves: int, rng: np.random.Generator, *, names: Sequence[str] | None = None
) -> list[tuple[str, ...]]:
    """Rows of a random K-level tree, one per leaf, leaf first. Node names are `{level}{index}` (e.g.
    `l3_07`), unique within their level; every node has at least one child."""
    sizes = level_sizes(k, n_leaves)
    prefixes = [str(n).lower() for n in names] if names else [f"l{j + 1}" for j in range(k)]
    parents = []
    for j in range(k - 1):
        # Every parent takes one child, the rest are spread at random.
        extra = rng.integers(0, sizes[j + 1], size=sizes[j] - sizes[j + 1])
        parents.append(rng.permutation(np.concatenate([np.arange(sizes[j + 1]), extra])))
    rows = []
    for leaf in range(n_leaves):
        path, node = [leaf], leaf
        for p in parents:
            node = int(p[node])
            path.append(node)
        rows.append(tuple(f"{prefixes[j]}_{i:02d}" for j, i in enumerate(path)))
    return rows


def deep_taxonomy(k: int, n_leaves: int = 30, seed: int = 0, names: Sequence[str] | None = None) -> Taxonomy:
    """A random K-level Taxonomy (see `deep_rows`); `names` are its level names (default Level 1 .. K)."""
    rows = deep_rows(k, n_leaves, np.random.default_rng(seed), names=names)
    return Taxonomy.from_rows(rows, level_names=tuple(names) if names else None)


def deep_featureset(
    k: int,
    *,
    n_leaves: int = 30,
    per_leaf: int = 4,
    dim: int = 8,
    seed: int = 0,
    names: Sequence[str] | None = None,
    name: str = "deep",
) -> FeatureSet:
    """A small K-level FeatureSet: `per_leaf` samples per leaf, the first half train, the rest test."""
    rng = np.random.default_rng(seed)
    tax = deep_taxonomy(k, n_leaves, seed, names)
    leaf = np.repeat(np.arange(n_leaves), per_leaf)
    split = np.tile(np.where(np.arange(per_leaf) < per_leaf // 2, 0, 2), n_leaves).astype(np.int8)
    return FeatureSet(
        name=name,
        features=rng.standard_normal((len(leaf), dim)).astype(np.float32),
        ids=np.array([f"{name}-{i:05d}" for i in range(len(leaf))], dtype=object),
        leaf=leaf,
        split=split,
        taxonomy=tax,
        kind="generic",
    )


def write_inat_json(
    path: str | Path,
    rows: Sequence[Sequence[str]],
    image_ids: Sequence[int],
    image_leaf: Sequence[int],
    *,
    year: int = 2021,
    category_ids: Sequence[int] | None = None,
) -> dict:
    """Write an iNaturalist annotation file and return its document.

    `rows[i]` are category i's names, leaf first, by `INAT_RANKS` (seven for 2021 and 2018; for 2017 the
    species and its supercategory). Image j (id `image_ids[j]`) is annotated with category
    `image_leaf[j]`. The fields are those of the published files: 2021 categories carry `id, name,
    common_name, supercategory, kingdom, phylum, class, order, family, genus, specific_epithet,
    image_dir_name`; 2018 `id, name, supercategory, kingdom, phylum, class, order, family, genus`; 2017
    `id, name, supercategory`.
    """
    ids = list(category_ids) if category_ids is not None else list(range(len(rows)))
    categories = []
    for cid, row in zip(ids, rows, strict=True):
        cat: dict[str, object] = {"id": int(cid), "name": row[0]}
        if year == 2017:
            cat["supercategory"] = row[1]
        else:
            ranks = dict(zip(INAT_RANKS, row, strict=False))
            cat["supercategory"] = ranks.get("kingdom", row[-1])
            for rank in ("kingdom", "phylum", "class", "order", "family", "genus"):
                if rank in ranks:
                    cat[rank] = ranks[rank]
            if year == 2021:
                cat["common_name"] = f"common {row[0]}"
                cat["specific_epithet"] = row[0].split(" ")[-1]
                cat["image_dir_name"] = f"{int(cid):05d}_{row[0].replace(' ', '_')}"
        categories.append(cat)
    images = [
        {"id": int(i), "file_name": f"train/{i}.jpg", "width": 500, "height": 375}
        | (
            {
                "license": 1,
                "rights_holder": "someone",
                "date": "2020-01-01",
                "latitude": 1.0,
                "longitude": 2.0,
            }
            if year == 2021
            else {}
        )
        for i in image_ids
    ]
    annotations = [
        {"id": n, "image_id": int(i), "category_id": int(ids[leaf])}
        | ({"iscrowd": 0, "area": 187500, "bbox": []} if year != 2021 else {})
        for n, (i, leaf) in enumerate(zip(image_ids, image_leaf, strict=True))
    ]
    doc = {
        "info": {"year": year, "version": str(year), "description": f"iNat{year} (test)"},
        "images": images,
        "categories": categories,
        "annotations": annotations,
        "licenses": [{"id": 1, "name": "CC BY", "url": "https://creativecommons.org/licenses/by/4.0/"}],
    }
    Path(path).write_text(json.dumps(doc), encoding="utf-8")
    return doc


def inat_rows(n_species: int, rng: np.random.Generator, k: int = 7) -> list[tuple[str, ...]]:
    """Category rows for `write_inat_json`: a random K-rank tree named like iNat (species are
    `Genus epithet`, the higher ranks capitalised words)."""
    rows = deep_rows(k, n_species, rng, names=INAT_RANKS[:k])
    out = []
    for row in rows:
        out.append((f"{row[1].capitalize()} sp{row[0][-2:]}", *(r.capitalize() for r in row[1:])))
    return out
