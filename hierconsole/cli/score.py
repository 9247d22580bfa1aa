"""`hierconsole score EMB.npz`: strict retrieval metrics for embeddings a user brings.

The one command whose work is the engine's, in this process (the metrics need torch; `replicate` only
times the engine there, in its calibration): it imports `hierconsole.engine` only when it runs, so building
the parser stays light.
"""

from __future__ import annotations

import argparse
import math
import pickle
import zipfile
from pathlib import Path

import numpy as np
from rich import box
from rich.table import Table

from hierconsole.cli.output import output_console
from hierconsole.config.options import Invalid
from hierconsole.config.preset import CURVATURE
from hierconsole.errors import InputError
from hierconsole.levels import MAX_LEVELS, MIN_LEVELS, PAPER_CODES, WHOLE_TREE, Levels, default_level_names
from hierconsole.metrics.names import MetricSet
from hierconsole.plurals import counted
from hierconsole.present.json_output import json_text
from hierconsole.vocabulary import (
    AGGREGATIONS,
    EUCLIDEAN,
    GEOMETRIES,
    MICRO,
    POINCARE,
    RECALL_KS,
)

REQUIRED = ("query", "gallery", "query_labels", "gallery_labels")
_SHOWN = 5
_NPZ_HINT = (
    "save with np.savez(path, query=Q, gallery=G, query_labels=QL, gallery_labels=GL), embeddings float "
    "[N, D], labels integer [N, K] with one column per level, finest first (three levels: leaf, middle, "
    f"high; {MIN_LEVELS} <= K <= {MAX_LEVELS}), optionally level_names=[K names]"
)


def _ks(value: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(p) for p in value.split(","))
    except ValueError:
        ks = ()
    if not ks or any(k < 1 for k in ks) or len(set(ks)) != len(ks):
        raise argparse.ArgumentTypeError(f"expected distinct positive integers like 1,5,10,20; got {value!r}")
    return ks


def _metrics(value: str) -> MetricSet:
    try:
        return MetricSet.parse(tuple(p.strip() for p in value.split(",") if p.strip()))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


DEFAULT_CURVATURE = 1.0
"""`score --curvature` when none is given: the unit ball."""


def _curvature(value: str) -> float:
    # The check a preset's [geometry.poincare] c passes, so the two can never accept different values.
    try:
        return float(CURVATURE(float(value)))
    except (ValueError, Invalid):
        raise argparse.ArgumentTypeError(
            f"the curvature must be a finite number > 0; got {value!r}"
        ) from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="strict retrieval metrics (mAP, Recall@K per level) for query/gallery embeddings in an .npz",
        description=(
            "Score query embeddings against gallery embeddings with strict hierarchical positives: leaf = "
            "same leaf; middle = same middle, different leaf; high = same high, different middle (and so on "
            "for deeper trees: a level's positives share its label but not the next finer one). Queries "
            "without a positive in the gallery at a level are left out of that level. Equal distances are "
            "ranked by gallery index. The .npz holds query [Q, D], gallery [G, D], query_labels [Q, K] and "
            f"gallery_labels [G, K] (integer columns, one per level, finest first; {MIN_LEVELS} <= K <= "
            f"{MAX_LEVELS}; three levels: leaf, middle, high) and optionally level_names (K strings)."
        ),
    )
    p.add_argument("npz", metavar="EMB.npz", type=Path, help="embeddings and labels (see above)")
    p.add_argument(
        "--geometry",
        choices=GEOMETRIES,
        default=EUCLIDEAN,
        help="distance to rank by (default euclidean, used as given: normalise first if you want cosine "
        "ranking). poincare assumes the points already lie on the ball of curvature -C and projects them "
        "onto it with geoopt's projx (points beyond the boundary margin are pulled inside)",
    )
    p.add_argument(
        "--curvature",
        metavar="C",
        type=_curvature,
        default=DEFAULT_CURVATURE,
        help=f"absolute curvature for poincare (default {DEFAULT_CURVATURE})",
    )
    p.add_argument(
        "--aggregate",
        choices=AGGREGATIONS,
        default=AGGREGATIONS[0],
        help="micro: mean over valid queries; macro: mean over groups (the query's label at each level) of "
        "the per-group means (default micro)",
    )
    p.add_argument(
        "--ks",
        type=_ks,
        default=RECALL_KS,
        metavar="K,K,...",
        help=f"Recall@K cut-offs (default {','.join(map(str, RECALL_KS))})",
    )
    p.add_argument(
        "--metrics",
        type=_metrics,
        default=None,
        metavar="NAME,NAME,...",
        help="the hierarchical metrics of hierconsole.metrics besides the strict ones: H-AP, ASI (HAPPIER's), "
        "NDCG@K, mistake_severity@K, CPCC (e.g. H-AP,NDCG@10,mistake_severity@1,CPCC), printed under "
        f"{WHOLE_TREE!r}; ranked by the same distance",
    )
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.set_defaults(func=_score)


def load_scoring_npz(
    path: Path,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...] | None]:
    """(query, gallery, query_labels, gallery_labels, level_names or None), checked; InputError lists every
    problem found."""
    if not path.is_file():
        raise InputError(path, "the file does not exist")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise InputError(path, "this is a single .npy array, not an .npz archive", hint=_NPZ_HINT)
        with loaded as z:
            missing = [name for name in REQUIRED if name not in z.files]
            if missing:
                raise InputError(
                    path,
                    [f"no array named {name!r}" for name in missing]
                    + [f"arrays present: {', '.join(z.files) or 'none'}"],
                    hint=_NPZ_HINT,
                )
            arrays = {name: z[name] for name in REQUIRED}
            raw_names = z["level_names"] if "level_names" in z.files else None
    except InputError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        # np.load refuses pickled (object) arrays with ValueError; damaged files raise the others.
        raise InputError(path, f"cannot read the file as .npz: {exc}", hint=_NPZ_HINT) from exc

    problems: list[str] = []
    emb: dict[str, np.ndarray] = {}
    for name in ("query", "gallery"):
        a = arrays[name]
        if a.dtype.kind not in "fiu":
            problems.append(f"{name!r} must hold real numbers, got dtype {a.dtype}")
        elif a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
            problems.append(f"{name!r} must be a non-empty [N, D] matrix, got shape {a.shape}")
        else:
            a = a.astype(np.float64 if a.dtype == np.float64 else np.float32)
            bad = np.flatnonzero(~np.isfinite(a).all(axis=1))
            if bad.size:
                problems.append(
                    f"{name!r} has NaN or infinite values in {counted(bad.size, 'row')} (first: {_first(bad)})"
                )
            emb[name] = a
    if len(emb) == 2 and emb["query"].shape[1] != emb["gallery"].shape[1]:
        problems.append(
            f"'query' has width {emb['query'].shape[1]} but 'gallery' has width {emb['gallery'].shape[1]}"
        )

    labels: dict[str, np.ndarray] = {}
    # The depth: the label columns (the wider array's when the two differ, as a dropped column is the
    # likelier mistake).
    widths = [a.shape[1] for a in (arrays["query_labels"], arrays["gallery_labels"]) if a.ndim == 2]
    k = max(widths, default=3)
    for name, rows_of in (("query_labels", "query"), ("gallery_labels", "gallery")):
        a = arrays[name]
        if a.dtype.kind not in "iu":
            problems.append(f"{name!r} must hold integers, got dtype {a.dtype}")
        elif a.ndim != 2 or not MIN_LEVELS <= a.shape[1] <= MAX_LEVELS:
            problems.append(
                f"{name!r} must be [N, K] with one column per level, finest first ({MIN_LEVELS} <= K <= "
                f"{MAX_LEVELS}; three levels: leaf, middle, high), got shape {a.shape}"
            )
        elif a.shape[1] != k:
            problems.append(
                f"{name!r} must be [N, {k}] like the other labels (one column per level, finest first), "
                f"got shape {a.shape}"
            )
        elif rows_of in emb and a.shape[0] != emb[rows_of].shape[0]:
            problems.append(f"{name!r} has {counted(a.shape[0], 'row')} but {rows_of!r} has {emb[rows_of].shape[0]}")
        else:
            labels[name] = a.astype(np.int64)
    if len(labels) == 2:
        problems += _tree_problems(np.concatenate([labels["query_labels"], labels["gallery_labels"]]))

    level_names = None
    if raw_names is not None:
        if raw_names.dtype.kind != "U" or raw_names.shape != (k,):
            problems.append(
                f"'level_names' must be {k} strings (one per label column), got dtype {raw_names.dtype} "
                f"shape {raw_names.shape}"
            )
        else:
            level_names = tuple(str(s) for s in raw_names)
    if problems:
        raise InputError(path, problems, hint=_NPZ_HINT)
    return emb["query"], emb["gallery"], labels["query_labels"], labels["gallery_labels"], level_names


def _first(idx: np.ndarray) -> str:
    shown = ", ".join(str(i) for i in idx[:_SHOWN])
    return shown + (", ..." if idx.size > _SHOWN else "")


def _tree_problems(labels: np.ndarray) -> list[str]:
    # Strict sets assume a tree: each label of a level has one label at the next coarser level (a leaf
    # one middle, a middle one high). A violation most often means the columns are in the wrong order
    # (e.g. high, middle, leaf).
    problems = []
    k = labels.shape[1]
    if k == 3:
        names: tuple[str, ...] = PAPER_CODES
        order = "columns must be (leaf, middle, high), finest first"
    else:
        names = tuple(f"level-{i}" for i in range(1, k + 1))
        order = f"columns must be the {k} levels, finest first"
    for child in range(k - 1):
        parent, child_name, parent_name = child + 1, names[child], names[child + 1]
        pairs = np.unique(labels[:, [child, parent]], axis=0)
        kids, counts = np.unique(pairs[:, 0], return_counts=True)
        bad = kids[counts > 1]
        if bad.size:
            problems.append(
                f"labels are not a tree: {bad.size} {child_name} labels have more than one {parent_name} "
                f"label (first: {_first(bad)}); {order}"
            )
    return problems


def _score(args: argparse.Namespace) -> int:
    query, gallery, q_labels, g_labels, level_names = load_scoring_npz(args.npz)
    import torch

    from hierconsole.engine.geometry import make_geometry
    from hierconsole.engine.retrieval import evaluate

    # A distance-only ball (no tangent scale): the embeddings are scored as they are.
    geometry = make_geometry(args.geometry, c=args.curvature)
    names = level_names or default_level_names(q_labels.shape[1])
    levels = Levels.of(names)  # three levels: leaf, middle, high whatever the names
    evaluation = evaluate(
        torch.from_numpy(query), torch.from_numpy(gallery), q_labels, g_labels, geometry, ks=args.ks, levels=levels
    )
    metrics = evaluation.aggregate(args.aggregate)
    tree_wide = _tree_wide(args, geometry, query, gallery, q_labels, g_labels)
    if args.json:
        out: dict[str, dict[str, float | int | None]] = {
            level: {k: _json_value(v) for k, v in m.items()} for level, m in metrics.items()
        }
        if tree_wide:
            out[WHOLE_TREE] = {name: _json_value(v) for name, (v, _) in tree_wide.items()}
            out[WHOLE_TREE].update({f"{name} queries": n for name, (_, n) in tree_wide.items()})
        print(json_text(out, indent=None), end="")
        return 0
    # A level's positives cross the next finer level's groups: "Genus (cross-class)".
    shown = {code: names[0] if i == 0 else f"{names[i]} (cross-{names[i - 1].lower()})" for i, code in enumerate(levels.codes)}
    geometry_text = args.geometry + (f" c={args.curvature:g}" if args.geometry == POINCARE else "")
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0, 0, 1),
        title=f"{args.npz.name}: {query.shape[0]} queries x {gallery.shape[0]} gallery, {geometry_text}, "
        f"{'query-micro' if args.aggregate == MICRO else 'group-macro'}",
    )
    table.add_column("level", no_wrap=True)
    for key in ["mAP"] + [f"R@{k}" for k in args.ks]:
        table.add_column(key, justify="right", no_wrap=True)
    table.add_column("queries", justify="right", no_wrap=True)
    with_groups = "groups" in metrics[levels.leaf]  # group-macro also counts the groups it averaged
    if with_groups:
        table.add_column("groups", justify="right", no_wrap=True)
    for level in levels.codes:
        m = metrics[level]
        row = [shown[level], _cell(m["mAP"])] + [_cell(m[f"R@{k}"]) for k in args.ks]
        row.append(str(m["valid_queries"]))
        if with_groups:
            row.append(str(m["groups"]))
        table.add_row(*row)
    output_console().print(table)
    if tree_wide:
        wide = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0, 0, 1), title="the whole tree")
        for column in ("metric", "value", "queries"):
            wide.add_column(column, justify="left" if column == "metric" else "right", no_wrap=True)
        for name, (value, n) in tree_wide.items():
            wide.add_row(name, _cell(value), "-" if name == "CPCC" else str(n))
        output_console().print(wide)
    return 0


def _tree_wide(
    args: argparse.Namespace,
    geometry: object,
    query: np.ndarray,
    gallery: np.ndarray,
    q_labels: np.ndarray,
    g_labels: np.ndarray,
) -> dict[str, tuple[float, int]]:
    """--metrics' tree-wide metrics: name -> (mean, queries it is over), through hierconsole.metrics."""
    wanted = args.metrics
    names = [n for n in wanted.names if not wanted.per_level(n)] if wanted is not None else []
    if not names:
        return {}
    from hierconsole.metrics import evaluate
    from hierconsole.metrics.distances import Poincare

    if args.geometry == POINCARE:
        # The points the strict metrics were scored on: projected onto the ball as the engine does.
        import torch

        project = geometry.ball.projx  # type: ignore[attr-defined]
        query, gallery = (project(torch.from_numpy(a)).numpy() for a in (query, gallery))
        distance: object = Poincare(args.curvature)
    else:
        distance = "euclidean"
    try:
        r = evaluate(query, gallery, q_labels, g_labels, metrics=names, geometry=distance, aggregate=args.aggregate)  # type: ignore[arg-type]
    except ValueError as exc:  # e.g. CPCC of fewer than three leaves
        raise InputError(args.npz, str(exc)) from exc
    means, counts = r.to_dict()[WHOLE_TREE], r.defined()[WHOLE_TREE]
    return {name: (means[name], counts[name]) for name in names}


def _json_value(v: float | int) -> float | int | None:
    # A level with no valid query has no mean; JSON has no NaN, so it is null.
    return None if isinstance(v, float) and math.isnan(v) else v


def _cell(v: float | int) -> str:
    return "-" if isinstance(v, float) and math.isnan(v) else f"{v:.4f}"
