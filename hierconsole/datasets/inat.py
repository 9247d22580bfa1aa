"""iNaturalist import: the 2017, 2018 and 2021 annotation files (COCO style) and a features file.

An annotation file holds `images` [{id, file_name, ...}], `annotations` [{image_id, category_id, ...}]
and `categories` [{id, name, ...rank fields}]. The ranks a file has decide the levels:

- 2021: `name` (the species), `genus, family, order, class, phylum, kingdom` (also `common_name`,
  `supercategory`, `specific_epithet`, `image_dir_name`, which are not levels);
- 2018 (with its published names): `name`, `genus, family, order, class, phylum, kingdom`;
- 2017: `name` and `supercategory` only (two levels: species, supercategory).

`levels` keeps the ranks named, finest first (default: every rank the file has). The taxonomy is built
from the categories that have samples; a name under two parents at any kept rank is refused, naming the
category ids. iNat publishes `train` and `val` files (test labels are not public), so the val file is the
official evaluation set: its images become this dataset's `test` split, and a study validates on a hold-out
of train as for any dataset without a val split. Without a val file every image is `train` (study it with
a hierarchy-disjoint split). Feature rows match images by image id or file_name (as `import generic`
matches ids), or follow the images' order (train file, then val file) when the features carry no ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hierconsole.datasets.features_io import align_rows, read_features, with_extraction
from hierconsole.datasets.featureset import SPLIT_NAMES, FeatureSet, source_hashes
from hierconsole.errors import ConfigError, InputError
from hierconsole.levels import MAX_LEVELS, MIN_LEVELS
from hierconsole.taxonomy import Taxonomy

RANKS: tuple[str, ...] = (
    "species",
    "genus",
    "family",
    "order",
    "class",
    "phylum",
    "kingdom",
    "supercategory",
)
"""Every rank an iNat file may carry, finest first (`supercategory` is 2017's only rank above species)."""
RANK_FIELD = {rank: ("name" if rank == "species" else rank) for rank in RANKS}
"""The category field holding each rank's name."""
_SEVEN = RANKS[:7]
_SHOWN = 20


def parse_levels(value: str) -> tuple[str, ...]:
    """`species,genus,family` as rank names, finest first. Checks the spelling and order only (which
    ranks a file has is checked once it is read); a ConfigError of one line otherwise."""
    parts = tuple(p.strip().lower() for p in value.split(","))
    unknown = [p for p in parts if p not in RANKS]
    problem = None
    if unknown or not all(parts):
        problem = f"{', '.join(repr(u) for u in unknown) or 'an empty name'} is not an iNat rank"
    elif not MIN_LEVELS <= len(parts) <= MAX_LEVELS or len(set(parts)) != len(parts):
        problem = f"give {MIN_LEVELS} or more distinct ranks"
    elif [RANKS.index(p) for p in parts] != sorted(RANKS.index(p) for p in parts):
        problem = f"ranks out of order (finest first: {','.join(r for r in RANKS if r in parts)})"
    if problem:
        raise ConfigError(
            f"--levels {value!r}: {problem}; name ranks from {', '.join(RANKS)}, finest first, "
            "comma-separated (e.g. species,genus,family,order)"
        )
    return parts


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, f"not a readable JSON annotation file: {exc}") from exc
    if not isinstance(doc, dict):
        raise InputError(path, "not an iNat annotation file: the top level is not an object")
    missing = [key for key in ("images", "annotations", "categories") if not isinstance(doc.get(key), list)]
    if missing:
        hint = (
            "iNat's test.json has no labels: give the train and val files"
            if "annotations" in missing
            else None
        )
        raise InputError(
            path,
            f"no {', '.join(missing)} list (an iNat file has images, annotations, categories)",
            hint=hint or "give an iNaturalist 2017, 2018 or 2021 train or val JSON file",
        )
    return doc


def file_ranks(categories: Sequence[dict]) -> tuple[str, ...]:
    """The ranks every category carries, finest first: the seven of 2018/2021, or 2017's two."""
    present = [r for r in _SEVEN if all(RANK_FIELD[r] in c for c in categories)]
    if len(present) > 1:
        return tuple(present)
    if all("name" in c and "supercategory" in c for c in categories):
        return ("species", "supercategory")
    return tuple(present)


def import_inat(
    features_path: str | Path,
    train_json: str | Path,
    val_json: str | Path | None = None,
    *,
    name: str,
    levels: Sequence[str] | None = None,
    expected_dim: int | None = None,
) -> FeatureSet:
    """A FeatureSet from iNat annotation files and a features file (see the module docstring). Writes
    nothing; every problem is an InputError naming its file and category ids or image ids."""
    features_path = Path(features_path)
    files = [(Path(train_json), SPLIT_NAMES.index("train"))]
    if val_json is not None:
        files.append((Path(val_json), SPLIT_NAMES.index("test")))
    docs = [(path, split, _read(path)) for path, split in files]

    categories: dict[int, dict] = {}
    for path, _, doc in docs:
        for cat in doc["categories"]:
            if not isinstance(cat, dict) or not isinstance(cat.get("id"), int):
                raise InputError(path, f"a category without an integer id: {str(cat)[:80]}")
            seen = categories.setdefault(cat["id"], cat)
            if seen != cat:
                raise InputError(
                    path,
                    f"category id {cat['id']} differs from its entry in {docs[0][0].name}",
                    hint="the train and val files must come from the same iNat release",
                )
    ranks = file_ranks(list(categories.values()))
    chosen = tuple(levels) if levels else ranks
    if len(ranks) < MIN_LEVELS:
        raise InputError(
            docs[0][0],
            f"its categories carry {', '.join(ranks) or 'no ranks'}: an iNat file's categories carry "
            "name and supercategory (2017) or name, genus ... kingdom (2018, 2021)",
            hint="give an iNaturalist 2017, 2018 or 2021 train or val JSON file",
        )
    absent = [r for r in chosen if r not in ranks]
    if absent:
        raise ConfigError(
            f"--levels {','.join(chosen)}: {', '.join(absent)} not in {docs[0][0].name}, whose categories "
            f"carry {', '.join(ranks)}; choose from those, finest first"
        )

    ids: list[str] = []
    files_of: list[str] = []
    cats: list[int] = []
    splits: list[int] = []
    where: list[str] = []
    for path, split, doc in docs:
        image_file = {}
        for img in doc["images"]:
            if isinstance(img, dict) and "id" in img:
                image_file[img["id"]] = str(img.get("file_name", ""))
        problems = []
        for n, ann in enumerate(doc["annotations"]):
            image, cat = (
                (ann.get("image_id"), ann.get("category_id")) if isinstance(ann, dict) else (None, None)
            )
            if image not in image_file:
                problems.append(f"annotation {n}: image_id {image!r} is not in images")
            elif cat not in categories:
                problems.append(f"annotation {n}: category_id {cat!r} is not in categories")
            else:
                ids.append(str(image))
                files_of.append(image_file[image])
                cats.append(cat)
                splits.append(split)
                where.append(f"image id {image} ({path.name} annotation {n})")
            if len(problems) >= _SHOWN:
                break
        if problems:
            raise InputError(
                path, problems, hint="every annotation names an image and a category of the file"
            )
    first: dict[str, int] = {}
    repeats = []
    for i, sid in enumerate(ids):
        if sid in first:
            repeats.append(f"{where[i]} repeats {where[first[sid]]}")
        first.setdefault(sid, i)
    if repeats:
        raise InputError(
            docs[0][0], repeats[:_SHOWN], hint="one label per image: iNat files annotate each image once"
        )
    if not ids:
        raise InputError(docs[0][0], "no annotated images")

    tax, leaf_of = _taxonomy(docs[0][0], categories, sorted(set(cats)), chosen)
    leaf = np.array([leaf_of[c] for c in cats], dtype=np.int64)
    feature_ids, x = read_features(features_path, expected_dim=expected_dim)
    order, scheme = align_rows(
        features_path,
        feature_ids,
        len(x),
        {"image id": ids, "file name": files_of},
        listing=" + ".join(p.name for p, _, _ in docs),
        describe=lambda i: where[i],
    )
    return FeatureSet(
        name=name,
        features=x[order],
        ids=np.array(ids, dtype=object),
        leaf=leaf,
        split=np.array(splits, dtype=np.int8),
        taxonomy=tax,
        kind="inat",
        sources=source_hashes(features_path, *(p for p, _, _ in docs)),
        params={"levels": list(chosen), "features_keyed_by": scheme, **with_extraction(features_path)},
    )


def _taxonomy(
    source: Path, categories: dict[int, dict], used: list[int], chosen: Sequence[str]
) -> tuple[Taxonomy, dict[int, int]]:
    """The tree of the used categories at the chosen ranks, and each category's leaf index. Categories
    that agree on every chosen rank share a leaf (e.g. the species of a genus when genus is the leaf)."""
    # A null, a number or a blank is no name: str() would make a node named "None" or "5".
    unnamed = [
        cid
        for cid in used
        if not all(isinstance(v := categories[cid].get(RANK_FIELD[r]), str) and v.strip() for r in chosen)
    ]
    if unnamed:
        shown = ", ".join(map(str, unnamed[:_SHOWN])) + (" ..." if len(unnamed) > _SHOWN else "")
        raise InputError(
            f"{source} categories",
            f"{len(unnamed)} categories have a {'/'.join(RANK_FIELD[r] for r in chosen)} value that is not a "
            f"non-empty string (null, a number or blank): category ids {shown}",
            hint="fix those categories, or keep fewer ranks with --levels",
        )
    rows: list[tuple[str, ...]] = []
    numbers: list[int] = []
    row_of: dict[tuple[str, ...], int] = {}
    for cid in used:
        row = tuple(categories[cid][RANK_FIELD[r]].strip() for r in chosen)
        if row not in row_of:
            row_of[row] = len(rows)
            rows.append(row)
            numbers.append(cid)
    names = tuple(r.capitalize() for r in chosen)
    try:
        tax = Taxonomy.from_rows(rows, level_names=names, source=source, row_numbers=numbers)
    except InputError as exc:
        # The rows are categories: name them by id, as a CSV's conflicts name its lines.
        problems = [re.sub(r"\brow(s?)\b", r"category id\1", p) for p in exc.problems]
        raise InputError(
            f"{source} categories",
            problems,
            hint=f"each {chosen[0]} needs exactly one {chosen[1]} (and so on up to {chosen[-1]}); "
            "keep fewer ranks with --levels, or fix the categories",
        ) from exc
    leaf_index = tax.leaf_index()
    return tax, {cid: leaf_index[categories[cid][RANK_FIELD[chosen[0]]].strip()] for cid in used}
