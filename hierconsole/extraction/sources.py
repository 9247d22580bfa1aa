"""Which images to extract, and under which ids: a CUB or NABirds folder's images.txt, or any folder.

Ids are the dataset's own (images.txt's image ids, or the `id` column of a folder's list) so that the
features file lines up with `hierconsole import` by id, in images.txt order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hierconsole.csv_input import read_csv_records
from hierconsole.datasets.cub import read_pair_file
from hierconsole.errors import InputError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")
SOURCES = ("cub", "nabirds", "folder")
_SHOWN = 10


@dataclass(frozen=True)
class ImageList:
    """The images of one extraction, in output order."""

    kind: str
    root: Path  # the folder given on the command line
    base: Path  # the folder the listed paths are relative to
    ids: tuple[str, ...]
    paths: tuple[str, ...]  # relative to `base`
    listing: str  # where the list came from, for messages and the manifest

    def __len__(self) -> int:
        return len(self.ids)

    def file(self, i: int) -> Path:
        return self.base / self.paths[i]

    def missing(self) -> list[int]:
        """Positions whose file does not exist (checked before anything is written)."""
        return [i for i in range(len(self)) if not self.file(i).exists()]


def dataset_images(kind: str, root: str | Path) -> ImageList:
    """A CUB-200-2011 or NABirds folder: images.txt lists `<id> <path under images/>`."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(
            root, "not a directory", hint=f"give the {kind} dataset folder that holds images.txt"
        )
    problems: list[str] = []
    listed = read_pair_file(root / "images.txt", ("image_id", "path"), problems)
    if not problems and not listed.keys:
        problems.append("images.txt: no images listed")
    if problems:
        raise InputError(
            root, problems, hint="images.txt has one '<image id> <relative path>' line per image"
        )
    base = root / "images"
    if not base.is_dir():
        raise InputError(
            root, "no images/ folder beside images.txt", hint="unpack the dataset's images/ folder"
        )
    return ImageList(kind, root, base, tuple(listed.keys), tuple(listed.values), "images.txt")


def folder_images(root: str | Path, listing: str | Path | None = None) -> ImageList:
    """Any folder: with `listing`, a CSV with columns id,path (path relative to the folder); without
    one, every image file under the folder, sorted, each keyed by its relative path."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "not a directory", hint="give the folder that holds the images")
    if listing is None:
        found = sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
        )
        if not found:
            raise InputError(
                root, f"no image files ({', '.join(IMAGE_SUFFIXES)}) under the folder", hint="check the path"
            )
        return ImageList("folder", root, root, tuple(found), tuple(found), "the folder's image files")
    return ImageList("folder", root, root, *_read_list(Path(listing)), str(listing))


def _read_list(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    raw, records = read_csv_records(path, "the image list", skip_blank=True)
    header = [h.strip().lower() for h in raw or []]
    if "id" not in header or "path" not in header:
        raise InputError(
            path, f"line 1: the header must name the columns id and path (got {','.join(header)!r})"
        )
    at_id, at_path = header.index("id"), header.index("path")
    ids: list[str] = []
    paths: list[str] = []
    problems: list[str] = []
    first: dict[str, int] = {}
    for line, rec in records:
        key = rec[at_id].strip() if at_id < len(rec) else ""
        rel = rec[at_path].strip() if at_path < len(rec) else ""
        if not key or not rel:
            problems.append(f"line {line}: empty id or path")
        elif key in first:
            problems.append(f"line {line}: id {key!r} repeats line {first[key]}")
        else:
            first[key] = line
            ids.append(key)
            paths.append(rel)
    if not ids and not problems:
        problems.append("no images listed")
    if problems:
        raise InputError(path, problems, hint="one 'id,path' row per image, ids unique")
    return tuple(ids), tuple(paths)


def outside_paths(base: Path, ids: tuple[str, ...], paths: tuple[str, ...]) -> list[str]:
    """The listed paths that leave `base`, the folder they are relative to: absolute ones, ones whose `..`
    climb out of it, and ones that lead out once resolved (a symlink in the folder to a file elsewhere).
    A dataset's own symlinks that stay inside the folder (as resolved) remain allowed."""
    root = base.resolve()
    out = []
    for key, rel in zip(ids, paths, strict=True):
        norm = os.path.normpath(rel)
        if os.path.isabs(rel) or norm == ".." or norm.startswith(".." + os.sep):
            out.append(f"id {key!r}: {rel!r} is outside the image folder")
        elif not (real := (base / rel).resolve()).is_relative_to(root):
            out.append(f"id {key!r}: {rel!r} is outside the image folder (a link to {str(real)!r})")
    return out


def check_inside(images: ImageList) -> None:
    """Refuse a list that names files outside its folder (an id,path list can otherwise make the
    extraction open and decode any file the user can read); `--allow-outside-paths` lifts it."""
    problems = outside_paths(images.base, images.ids, images.paths)
    if problems:
        raise InputError(
            images.listing if images.listing != "images.txt" else images.root / "images.txt",
            problems,
            hint=f"list paths relative to {images.base}, or pass --allow-outside-paths to read them where they are",
        )


def missing_files_error(images: ImageList, missing: list[int]) -> InputError:
    shown = [f"{images.paths[i]} (id {images.ids[i]!r})" for i in missing[:_SHOWN]]
    more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
    return InputError(
        images.base,
        f"{len(missing)} image file{'s' if len(missing) > 1 else ''} listed in {images.listing} "
        f"{'do' if len(missing) > 1 else 'does'} not exist: {', '.join(shown)}{more}",
        hint="restore the files, or pass --on-error continue to extract the others and list these",
    )
