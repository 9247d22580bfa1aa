"""Reading feature files (.npy, .npz, .parquet, .safetensors, .pt) and lining their rows up with samples.

Every reader returns (ids or None, float32 [N, D]) after the same checks, so a problem is reported the
same way whatever the format: file, row numbers (0-based, as in the array), what is wrong, how to fix it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

import numpy as np

from hierconsole.errors import InputError

SUFFIXES = (".npy", ".npz", ".parquet", ".safetensors", ".pt")
_SHOWN = 10


def read_features(
    path: str | Path, *, expected_dim: int | None = None
) -> tuple[np.ndarray | None, np.ndarray]:
    """(ids as a str object array, or None when the file has none; features float32 [N, D])."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "the features file does not exist")
    suffix = path.suffix.lower()
    readers: dict[str, Callable[[Path], tuple[object, object]]] = {
        ".npy": _read_npy,
        ".npz": _read_npz,
        ".parquet": _read_parquet,
        ".safetensors": _read_safetensors,
        ".pt": _read_pt,
    }
    if suffix not in readers:
        raise InputError(
            path, f"unknown features format {suffix!r}", hint=f"use one of {', '.join(SUFFIXES)}"
        )
    try:
        ids, features = readers[suffix](path)
    except InputError:
        raise
    except Exception as exc:  # each library raises its own types for a damaged file
        raise InputError(path, f"cannot read the file as {suffix}: {exc}") from exc
    return _checked(path, ids, features, expected_dim)


EXTRACTION_FIELDS = ("model", "weights", "feature", "preprocessing", "images_sha256", "torch", "transformers", "device", "precision")
"""What a dataset records of the extraction that made its features (the manifest `hierconsole extract` puts in
the .npz it writes): the backbone and its weights' hash, the images' hash, the versions and the device."""


def extraction_record(path: str | Path) -> dict | None:
    """The extraction manifest embedded in a features file written by `hierconsole extract` (an .npz with a
    `manifest` entry), reduced to :data:`EXTRACTION_FIELDS`; None for any other file, or one without it."""
    path = Path(path)
    if path.suffix.lower() != ".npz":
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if "manifest" not in z.files:
                return None
            manifest = json.loads(str(z["manifest"]))
    except (OSError, ValueError, RecursionError):  # no manifest to compare: the import checks the rest
        return None
    if not isinstance(manifest, dict):
        return None
    return {k: manifest[k] for k in EXTRACTION_FIELDS if k in manifest}


def with_extraction(path: str | Path) -> dict[str, dict]:
    """``{"extraction": record}`` for a dataset's params when the features file has one, else ``{}``."""
    record = extraction_record(path)
    return {"extraction": record} if record else {}


def _read_npy(path: Path) -> tuple[None, np.ndarray]:
    return None, np.load(path, allow_pickle=False)


def _read_npz(path: Path) -> tuple[object, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        if "features" not in z.files:
            raise InputError(
                path,
                f"no array named 'features' (arrays: {', '.join(z.files) or 'none'})",
                hint="save with np.savez(path, features=X, ids=ids)",
            )
        return (z["ids"] if "ids" in z.files else None), z["features"]


def _read_parquet(path: Path) -> tuple[object, np.ndarray]:
    # Imported here: a worker loads datasets through this package and must run where only torch, numpy
    # and geoopt are installed (tests/engine/test_import_closure.py).
    import polars as pl

    df = pl.read_parquet(path)
    ids = df["id"].to_numpy() if "id" in df.columns else None
    rest = df.drop("id") if "id" in df.columns else df
    if "features" in rest.columns and isinstance(rest.schema["features"], (pl.List, pl.Array)):
        col = rest["features"]
        if col.null_count():
            rows = np.flatnonzero(col.is_null().to_numpy())
            raise InputError(path, f"the features column is empty on {_rows(rows)}")
        lengths = col.list.len().to_numpy() if isinstance(col.dtype, pl.List) else None
        if lengths is not None and len(lengths) and (lengths != lengths[0]).any():
            odd = np.flatnonzero(lengths != lengths[0])
            raise InputError(
                path,
                f"feature vectors differ in length: row 0 has {lengths[0]}, {_rows(odd)} differ",
                hint="every row needs the same dimension",
            )
        flat = col.explode() if lengths is not None else col.arr.explode()
        # lengths is None for an Array column, whose dtype has its width as .size
        dim = int(lengths[0]) if lengths is not None and len(lengths) else cast(pl.Array, col.dtype).size
        values = flat.cast(pl.Float64).fill_null(float("nan")).to_numpy()
        return ids, values.reshape(len(col), dim)
    non_numeric = [c for c, t in rest.schema.items() if not t.is_numeric()]
    if non_numeric or not rest.columns:
        raise InputError(
            path,
            f"columns {', '.join(non_numeric) or '(none)'} are not numeric",
            hint="use an 'id' column plus either one list column 'features' or one numeric column per dimension",
        )
    return ids, rest.cast(pl.Float64).fill_null(float("nan")).to_numpy()


def _read_safetensors(path: Path) -> tuple[object, np.ndarray]:
    from safetensors.numpy import load_file

    tensors = load_file(str(path))
    if "features" not in tensors:
        raise InputError(
            path,
            f"no tensor named 'features' (tensors: {', '.join(tensors) or 'none'})",
            hint="save with safetensors save_file({'features': X}, path); integer ids may go in 'ids'",
        )
    return tensors.get("ids"), tensors["features"]


def _read_pt(path: Path) -> tuple[object, np.ndarray]:
    import torch

    obj = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(obj, Mapping):
        if "features" not in obj:
            raise InputError(
                path,
                f"the dict has no 'features' key (keys: {', '.join(map(str, obj)) or 'none'})",
                hint="save torch.save({'features': X, 'ids': ids}, path)",
            )
        features, ids = obj["features"], obj.get("ids")
    else:
        features, ids = obj, None
    if not isinstance(features, torch.Tensor):
        raise InputError(path, f"'features' is a {type(features).__name__}, not a tensor")
    if isinstance(ids, torch.Tensor):
        ids = ids.numpy()
    elif ids is not None:
        ids = np.array(list(ids), dtype=object)
    return ids, features.detach().to(torch.float32).numpy()


def _checked(
    path: Path, ids: object, features: object, expected_dim: int | None
) -> tuple[np.ndarray | None, np.ndarray]:
    x = np.asarray(features)
    if x.dtype.kind not in "fiu":
        raise InputError(path, f"features have dtype {x.dtype}, not numbers", hint="store a float array")
    if x.ndim != 2:
        what = f"a {x.ndim}-D array of shape {x.shape}"
        raise InputError(path, f"features are {what}; expected a 2-D array [N images, D dimensions]")
    n, d = x.shape
    problems = []
    if n == 0 or d == 0:
        problems.append(f"features have shape {x.shape}: no rows or no dimensions")
    if expected_dim is not None and d != expected_dim:
        problems.append(f"features have {d} dimensions, expected {expected_dim}")
    x = np.ascontiguousarray(x, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
    id_list = _ids(path, ids) if ids is not None else None
    if len(bad):
        named = [f"{r} (id {id_list[r]!r})" for r in bad[:_SHOWN]] if id_list is not None else None
        problems.append(f"NaN or infinite values on {_rows(bad, named)}")
    if id_list is not None:
        if len(id_list) != n:
            problems.append(f"{len(id_list)} ids for {n} feature rows")
        else:
            problems += _duplicates(id_list)
    if problems:
        raise InputError(path, problems, hint="fix or re-extract the features file")
    return (np.array(id_list, dtype=object) if id_list is not None else None), x


def _ids(path: Path, ids: object) -> list[str]:
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InputError(path, f"ids have shape {arr.shape}; expected one id per row")
    if arr.dtype.kind == "f" and np.isfinite(arr).all() and (arr == np.round(arr)).all():
        arr = arr.astype(np.int64)  # integer ids that went through a float column
    if arr.dtype.kind == "S":
        return [v.decode("utf-8") for v in arr.tolist()]
    return [str(v) for v in arr.tolist()]


def _duplicates(ids: Sequence[str]) -> list[str]:
    first: dict[str, int] = {}
    dups: dict[str, list[int]] = {}
    for i, key in enumerate(ids):
        if key in first:
            dups.setdefault(key, [first[key]]).append(i)
        else:
            first[key] = i
    out = [f"id {k!r} appears on rows {', '.join(map(str, rows))}" for k, rows in list(dups.items())[:_SHOWN]]
    if len(dups) > _SHOWN:
        out.append(f"... {len(dups) - _SHOWN} more duplicated ids")
    return out


def _rows(rows: np.ndarray, named: list[str] | None = None) -> str:
    shown = named if named is not None else [str(r) for r in rows[:_SHOWN].tolist()]
    more = f" and {len(rows) - _SHOWN} more" if len(rows) > _SHOWN else ""
    return f"row{'s' if len(rows) > 1 else ''} {', '.join(shown)}{more} (0-based; {len(rows)} in all)"


def align_rows(
    path: str | Path,
    feature_ids: np.ndarray | None,
    n_features: int,
    keys: Mapping[str, Sequence[str]],
    *,
    listing: str,
    describe: Callable[[int], str],
) -> tuple[np.ndarray, str]:
    """Row order that lines features up with samples: `order[i]` is the feature row of sample i.

    `keys` maps a key scheme name (e.g. "image id", "relative path") to one key per sample; the scheme
    matching most feature ids is used. Without ids, rows must follow the `listing` file's order.
    `describe(i)` names sample i in messages (file and line). Returns (order, scheme name).
    """
    n = len(next(iter(keys.values())))
    if feature_ids is None:
        if n_features != n:
            raise InputError(
                path,
                f"{n_features} feature rows but {listing} lists {n} samples",
                hint=f"without ids the rows must follow {listing} order one to one; or store ids in the file",
            )
        return np.arange(n, dtype=np.int64), "row order"
    position = {key: i for i, key in enumerate(feature_ids.tolist())}
    scheme = max(keys, key=lambda s: sum(k in position for k in keys[s]))
    wanted = keys[scheme]
    missing = [i for i, k in enumerate(wanted) if k not in position]
    known = set(wanted)
    unknown = [k for k in feature_ids.tolist() if k not in known]
    problems = [f"no features for {describe(i)}" for i in missing[:_SHOWN]]
    if len(missing) > _SHOWN:
        problems.append(
            f"... and {len(missing) - _SHOWN} more samples without features ({len(missing)} in all)"
        )
    if unknown:
        shown = ", ".join(repr(k) for k in unknown[:_SHOWN])
        problems.append(
            f"{len(unknown)} feature ids are not in {listing} (matched by {scheme}): {shown}"
            + (" ..." if len(unknown) > _SHOWN else "")
        )
    if problems:
        alternatives = " or ".join(keys)
        raise InputError(path, problems, hint=f"ids in the features file must be the samples' {alternatives}")
    return np.array([position[k] for k in wanted], dtype=np.int64), scheme
