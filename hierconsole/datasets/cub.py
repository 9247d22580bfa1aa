"""CUB-200-2011 directory import, and the reader of its text-file layout (NABirds ships the same layout).

Each file holds `<key> <value>` lines split on the first whitespace only, since names and paths may hold
spaces. CUB ships no hierarchy: the Class -> Genus -> Family tree comes from a taxonomy CSV whose leaf
column names CUB classes, either in full (`001.Black_footed_Albatross`) or without the `NNN.` prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hierconsole.bounded_input import text_lines
from hierconsole.datasets.features_io import align_rows, read_features, with_extraction
from hierconsole.datasets.featureset import FeatureSet, source_hashes
from hierconsole.errors import InputError
from hierconsole.taxonomy import Taxonomy, read_taxonomy_rows
from hierconsole.vocabulary import CUB_LEVEL_NAMES

_SHOWN = 20
TRAIN_FLAG = {"1": 0, "0": 2}  # train_test_split.txt value -> index into SPLIT_NAMES


@dataclass
class PairFile:
    """The `<key> <value>` lines of one file, with their line numbers."""

    path: Path
    keys: list[str]
    values: list[str]
    lines: list[int]

    def line_of(self) -> dict[str, int]:
        return dict(zip(self.keys, self.lines, strict=True))

    def mapping(self) -> dict[str, str]:
        return dict(zip(self.keys, self.values, strict=True))


def read_pair_file(path: Path, columns: tuple[str, str], problems: list[str]) -> PairFile:
    """Parse `<key> <value>` lines; malformed lines, repeated keys and a missing file go to `problems`."""
    keys: list[str] = []
    values: list[str] = []
    lines: list[int] = []
    if not path.is_file():
        problems.append(f"{path.name}: missing (expected {path})")
        return PairFile(path, keys, values, lines)
    first: dict[str, int] = {}
    try:
        # Within bounds: a device or a file without line ends is refused, not read into memory.
        text = list(text_lines(path, "the list"))
    except OSError as exc:
        problems.append(f"{path.name}: cannot read as UTF-8 text: {exc.strerror or exc}")
        return PairFile(path, keys, values, lines)
    except InputError as exc:
        problems.append(f"{path.name}: {'; '.join(exc.problems)}")
        return PairFile(path, keys, values, lines)
    for number, raw in enumerate(text, start=1):
        line = raw.strip()
        if not line:
            continue
        parts = line.split(maxsplit=1)
        if len(parts) < 2:
            problems.append(
                f"{path.name} line {number}: expected '<{columns[0]}> <{columns[1]}>', got {line!r}"
            )
            continue
        key, value = parts[0], parts[1].strip()
        if key in first:
            problems.append(f"{path.name} line {number}: {columns[0]} {key!r} repeats line {first[key]}")
            continue
        first[key] = number
        keys.append(key)
        values.append(value)
        lines.append(number)
    return PairFile(path, keys, values, lines)


@dataclass
class ImageDir:
    """The image list of a CUB-layout directory, checked across its four files."""

    root: Path
    ids: list[str]
    paths: list[str]
    lines: list[int]  # images.txt line of each image
    class_ids: list[str]  # class of each image
    split: np.ndarray  # int8 codes into SPLIT_NAMES
    classes: PairFile

    def describe(self, i: int) -> str:
        return f"image {self.ids[i]!r} ({self.paths[i]}, images.txt line {self.lines[i]})"

    def files(self) -> list[Path]:
        return [self.root / n for n in ("images.txt", "image_class_labels.txt", "train_test_split.txt")] + [
            self.classes.path
        ]


def read_image_dir(
    root: str | Path, *, extra: Callable[[list[str], PairFile], None] | None = None
) -> ImageDir:
    """Read images.txt, image_class_labels.txt, train_test_split.txt and classes.txt under `root`.

    All problems of all four files are raised together as one InputError. `extra(problems, classes)` lets
    a caller add checks of its own files to the same report.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "not a directory", hint="give the dataset folder that holds images.txt")
    problems: list[str] = []
    images = read_pair_file(root / "images.txt", ("image_id", "path"), problems)
    if not problems and not images.keys:  # first: the other files' problems follow from it
        problems.append("images.txt: no images listed")
    labels = read_pair_file(root / "image_class_labels.txt", ("image_id", "class_id"), problems)
    flags = read_pair_file(root / "train_test_split.txt", ("image_id", "is_training_image"), problems)
    before = len(problems)
    classes = read_pair_file(root / "classes.txt", ("class_id", "class_name"), problems)
    if len(problems) == before and not classes.keys:  # else every image's class would be named unknown
        problems.append("classes.txt: no classes listed")
    image_line = images.line_of()
    class_ids = set(classes.keys)
    # Checked against images.txt only when it lists images: else every line of the others would be
    # reported as a consequence, burying the one problem there is.
    for pf, what in ((labels, "a class"), (flags, "a split flag")) if images.keys else ():
        for key, line in zip(pf.keys, pf.lines, strict=True):
            if key not in image_line:
                problems.append(f"{pf.path.name} line {line}: image id {key!r} is not in images.txt")
        given = set(pf.keys)
        lacking = [k for k in images.keys if k not in given]
        for key in lacking[:_SHOWN]:
            problems.append(
                f"images.txt line {image_line[key]}: image {key!r} has no line in {pf.path.name} ({what})"
            )
        if len(lacking) > _SHOWN:
            problems.append(f"... {len(lacking) - _SHOWN} more images without a line in {pf.path.name}")
    if classes.keys:
        for key, value, line in zip(labels.keys, labels.values, labels.lines, strict=True):
            if value not in class_ids:
                problems.append(
                    f"image_class_labels.txt line {line}: class id {value!r} of image {key!r} is not in classes.txt"
                )
    for key, value, line in zip(flags.keys, flags.values, flags.lines, strict=True):
        if value not in TRAIN_FLAG:
            problems.append(
                f"train_test_split.txt line {line}: split flag {value!r} for image {key!r} is not 1 (train) "
                "or 0 (test)"
            )
    if extra is not None:
        extra(problems, classes)
    if problems:
        raise InputError(
            root, problems, hint="each line is '<id> <value>'; every image needs one line per file"
        )
    label_of = labels.mapping()
    flag_of = flags.mapping()
    return ImageDir(
        root=root,
        ids=images.keys,
        paths=images.values,
        lines=images.lines,
        class_ids=[label_of[k] for k in images.keys],
        split=np.array([TRAIN_FLAG[flag_of[k]] for k in images.keys], dtype=np.int8),
        classes=classes,
    )


def class_order(class_ids: set[str]) -> list[str]:
    """Class ids numerically when they are numbers, else as text, so leaf indices follow the dataset."""
    if all(c.isdigit() for c in class_ids):
        return sorted(class_ids, key=int)
    return sorted(class_ids)


def read_features_for(table: ImageDir, features_path: str | Path) -> tuple[np.ndarray, str]:
    """Features in image order; the file's ids may be image ids or image paths (detected)."""
    ids, x = read_features(features_path)
    keys = {
        "image id": table.ids,
        "relative path": table.paths,
        "images/ path": [f"images/{p}" for p in table.paths],
    }
    order, scheme = align_rows(
        features_path, ids, len(x), keys, listing="images.txt", describe=table.describe
    )
    return x[order], scheme


_PREFIX = re.compile(r"^\d+\.")


def _short(name: str) -> str:
    return _PREFIX.sub("", name.strip())


def _loose(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", _short(name)).strip().lower()


def match_classes(
    taxonomy_csv: Path, rows: list[tuple[str, ...]], numbers: list[int], classes: PairFile
) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """Map taxonomy rows to CUB class ids: (class id -> row position, how many matched each way, problems).

    A row matches by the full class name, else the name without its `NNN.` prefix, else ignoring case,
    underscores, hyphens and spaces; a looser key shared by two classes matches neither.
    """
    tiers: list[tuple[str, Callable[[str], str]]] = [
        ("full name", lambda s: s.strip()),
        ("name without prefix", _short),
        ("case/underscore-insensitive", _loose),
    ]
    indexes = []
    for _, key in tiers:
        index: dict[str, list[str]] = {}
        for class_id, name in zip(classes.keys, classes.values, strict=True):
            index.setdefault(key(name), []).append(class_id)
        indexes.append(index)
    found: dict[str, int] = {}
    how = {label: 0 for label, _ in tiers}
    problems = []
    for pos, (leaf, _, _) in enumerate(rows):
        if not leaf:
            problems.append(f"{taxonomy_csv.name} row {numbers[pos]}: empty leaf name")
            continue
        cid: str | None = None
        for (label, key), index in zip(tiers, indexes, strict=True):
            hits = index.get(key(leaf), [])
            if len(hits) == 1:
                cid = hits[0]
                how[label] += 1
                break
        if cid is None:
            problems.append(
                f"{taxonomy_csv.name} row {numbers[pos]}: leaf {leaf!r} matches no class in classes.txt "
                "(tried the full name, the name without its 'NNN.' prefix, and ignoring case/underscores)"
            )
        elif cid in found:
            problems.append(
                f"{taxonomy_csv.name} rows {numbers[found[cid]]} and {numbers[pos]} both name class "
                f"{classes.mapping()[cid]!r}"
            )
        else:
            found[cid] = pos
    return found, how, problems


def cub_taxonomy(
    table: ImageDir, taxonomy_csv: Path, level_names: tuple[str, ...] = CUB_LEVEL_NAMES
) -> tuple[Taxonomy, list[str], dict[str, int]]:
    """The taxonomy a CSV gives the folder's classes, the class ids in leaf order and how the leaves were
    matched: every check `import cub` makes of the taxonomy (so `replicate --cub-taxonomy` can refuse one
    before it starts)."""
    rows, numbers, _ = read_taxonomy_rows(taxonomy_csv, level_names=level_names)
    found, how, problems = match_classes(taxonomy_csv, rows, numbers, table.classes)
    used = set(table.class_ids)
    class_name = table.classes.mapping()
    class_line = table.classes.line_of()
    counts: dict[str, int] = {}
    for cid in table.class_ids:
        counts[cid] = counts.get(cid, 0) + 1
    for cid in class_order(used):
        if cid not in found:
            problems.append(
                f"classes.txt line {class_line[cid]}: class {class_name[cid]!r} ({counts[cid]} images) "
                f"has no row in {taxonomy_csv.name}"
            )
    for cid, pos in found.items():
        if cid not in used:
            problems.append(
                f"{taxonomy_csv.name} row {numbers[pos]}: {level_names[0]} {class_name[cid]!r} has no images "
                "in image_class_labels.txt"
            )
    order = class_order(used & set(found))
    tax = None
    try:
        tax = Taxonomy.from_rows(
            [(class_name[cid], rows[found[cid]][1], rows[found[cid]][2]) for cid in order],
            level_names=level_names,
            source=taxonomy_csv,
            row_numbers=[numbers[found[cid]] for cid in order],
        )
    except InputError as exc:
        problems += exc.problems
    if problems or tax is None:
        raise InputError(
            taxonomy_csv,
            problems,
            hint="give each CUB class with images exactly one row (leaf,middle,high) and no others",
        )
    return tax, order, how


def import_cub(
    root: str | Path,
    features_path: str | Path,
    taxonomy_csv: str | Path,
    *,
    name: str = "cub",
    level_names: tuple[str, ...] = CUB_LEVEL_NAMES,
) -> FeatureSet:
    """A FeatureSet from a CUB-200-2011 folder, a features file and a Class,Genus,Family taxonomy CSV.

    Rows follow images.txt; leaf indices follow class ids; leaves are named as in classes.txt. Writes
    nothing. Raises InputError listing every problem of the stage that failed (folder, taxonomy, features).
    """
    root = Path(root)
    taxonomy_csv = Path(taxonomy_csv)
    table = read_image_dir(root)
    tax, order, how = cub_taxonomy(table, taxonomy_csv, level_names)
    x, scheme = read_features_for(table, features_path)
    leaf_of = {cid: i for i, cid in enumerate(order)}
    return FeatureSet(
        name=name,
        features=x,
        ids=np.array(table.ids, dtype=object),
        leaf=np.array([leaf_of[c] for c in table.class_ids], dtype=np.int64),
        split=table.split,
        taxonomy=tax,
        kind="cub",
        sources=source_hashes(*table.files(), taxonomy_csv, features_path),
        params={
            "root": str(root.resolve()),
            "features_keyed_by": scheme,
            "leaves_matched_by": how,
            **with_extraction(features_path),
        },
    )
