"""`hierconsole import ...`, `datasets`, `taxonomy`: getting features and taxonomies into the store."""

from __future__ import annotations

import argparse

from hierconsole.cli.output import confirmed, output_console, print_grid
from hierconsole.cli.reading import open_for_reading
from hierconsole.datasets.inat import parse_levels
from hierconsole.datasets.splits import HOLDOUT_FRACTION
from hierconsole.errors import InputError
from hierconsole.levels import MAX_LEVELS, MIN_LEVELS
from hierconsole.present.tables.studies import datasets_grid
from hierconsole.study import read
from hierconsole.study.commands import delete_dataset, import_dataset, read_dataset
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import SYNTHETIC_DATASETS


def _level_names(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    parts = tuple(p.strip() for p in value.split(","))
    if not MIN_LEVELS <= len(parts) <= MAX_LEVELS or not all(parts):
        raise argparse.ArgumentTypeError(
            f"give {MIN_LEVELS} to {MAX_LEVELS} names, one per taxonomy column, finest first, "
            "e.g. Class,Genus,Family"
        )
    return parts


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import a feature set with its labels and taxonomy")
    kinds = p.add_subparsers(dest="source", metavar="SOURCE", required=True)

    g = kinds.add_parser("generic", help="features file + labels CSV (id,leaf[,split]) + taxonomy CSV")
    g.add_argument("features", help=".npy, .npz, .parquet, .safetensors or .pt")
    g.add_argument("labels", help="CSV with columns id,leaf[,split]")
    g.add_argument(
        "taxonomy",
        help=f"CSV with one column per level, leaf first, {MIN_LEVELS} to {MAX_LEVELS} levels; its header names "
        "them (e.g. species,genus,family,order) or is leaf,middle,high",
    )
    g.add_argument("--name", required=True, help="dataset id in the store")
    g.add_argument(
        "--level-names",
        type=_level_names,
        help="display names, one per level, leaf first (e.g. Class,Genus,Family); default: the header's",
    )
    g.add_argument("--dim", type=int, help="expected feature width (e.g. 768); checked on import")
    g.set_defaults(func=_import)

    c = kinds.add_parser("cub", help="a CUB-200-2011 folder + features + taxonomy CSV")
    c.add_argument("root", help="folder holding images.txt, image_class_labels.txt, ...")
    c.add_argument("features", help="features keyed by image id or relative path (or in images.txt order)")
    c.add_argument("taxonomy", help="CSV leaf,middle,high with CUB class names as leaves")
    c.add_argument("--name", default="cub")
    c.set_defaults(func=_import)

    n = kinds.add_parser("nabirds", help="a NABirds folder (with hierarchy.txt) + features")
    n.add_argument("root")
    n.add_argument("features")
    n.add_argument("--name", default="nabirds")
    n.set_defaults(func=_import)

    i = kinds.add_parser(
        "inat",
        help="iNaturalist 2017/2018/2021 annotation JSON (train, optional val) + features keyed by image id",
        description="Import iNaturalist: the train annotation file, optionally the val file, and a features "
        "file whose ids are the image ids (or file names; without ids its rows follow the train file's "
        "annotations, then the val file's). iNat's test labels are not public, so the val file is the "
        "evaluation set: its images become the test split and studies validate on a hold-out of train. "
        "Without --val every image is train (study it with a hierarchy-disjoint split).",
    )
    i.add_argument("features", help=".npy, .npz, .parquet, .safetensors or .pt (ids: image ids)")
    i.add_argument("--train", required=True, help="the train annotation JSON (e.g. train.json, train_mini.json)")
    i.add_argument("--val", help="the val annotation JSON: becomes the test split")
    i.add_argument("--name", default="inat", help="dataset id in the store (default inat)")
    i.add_argument(
        "--levels",
        help="ranks to keep, finest first, e.g. species,genus,family,order (default: every rank the file "
        "has: seven for 2018/2021, species,supercategory for 2017)",
    )
    i.add_argument("--dim", type=int, help="expected feature width (e.g. 768); checked on import")
    i.set_defaults(func=_import)

    s = kinds.add_parser("synthetic", help="the built-in synthetic data (demo, CUB-sized, or a deep tree: tree2, tree5, tree7, tree12)")
    s.add_argument("which", choices=SYNTHETIC_DATASETS, nargs="?", default=SYNTHETIC_DATASETS[0])
    s.set_defaults(func=_import)

    for q in (g, c, n, i):
        q.add_argument("--replace", action="store_true", help="replace a dataset of the same name")

    d = sub.add_parser("datasets", help="list the datasets in the store (or delete one)")
    d.set_defaults(func=_datasets)
    actions = d.add_subparsers(dest="action", metavar="ACTION")
    x = actions.add_parser("delete", help="delete a dataset no study uses (its rows and its folder)")
    x.add_argument("dataset")
    x.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    x.set_defaults(func=_delete_dataset)

    t = sub.add_parser(
        "taxonomy",
        help="summary and validation report of a dataset's taxonomy; `taxonomy build-cub ...` builds the "
        "CUB taxonomy from a checklist",
    )
    t.add_argument("dataset", help="a dataset in the store, or build-cub (see `taxonomy build-cub --help`)")
    # `taxonomy build-cub` has its own parser (cli/taxonomy_build.py); a dataset id takes no more arguments.
    t.add_argument("more", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    t.set_defaults(func=_taxonomy, taxonomy_parser=t)


def _import(args: argparse.Namespace) -> int:
    """Read the files (the name checked first; the home is not created until they read well), register."""
    keys = ("features", "labels", "taxonomy", "root", "train", "val")
    paths = {k: getattr(args, k) for k in keys if getattr(args, k, None)}
    name = args.which if args.source == "synthetic" else args.name
    fs = read_dataset(
        args.source,
        name,
        paths,
        level_names=getattr(args, "level_names", None),
        dim=getattr(args, "dim", None),
        # Spelling and order checked before any file is read or the home is created.
        levels=parse_levels(args.levels) if getattr(args, "levels", None) else None,
    )
    with Store(args.home) as store:
        info = import_dataset(store, fs, replace=getattr(args, "replace", False))
    counts = "/".join(str(n) for n in fs.taxonomy.counts)
    output_console().print(
        f"[green]imported[/] {info.dataset_id}: {info.n_samples:,} samples x {info.dim}-D, "
        f"{counts} {'/'.join(info.level_names)}, "
        f"train {info.n_train:,} / val {info.n_val:,} / test {info.n_test:,}"
    )
    for line in fs.taxonomy.summary().lines():
        output_console().print(f"  {line}", highlight=False)
    if not info.n_val:
        # Said here and in every run's split plan: nothing is carved silently.
        output_console().print(
            f"  no val split: a study on {info.dataset_id} validates on a leaf-stratified "
            f"{HOLDOUT_FRACTION:.0%} hold-out of train (see `run PRESET --dataset {info.dataset_id} --dry-run`)",
            highlight=False,
        )
    return 0


def _datasets(args: argparse.Namespace) -> int:
    with open_for_reading(args.home) as store:
        print_grid(output_console(), datasets_grid(read.list_datasets(store)))
    return 0


def _delete_dataset(args: argparse.Namespace) -> int:
    with Store(args.home) as store:
        info = read.get_dataset(store, args.dataset)
        question = f"delete dataset {info.dataset_id} ({info.n_samples:,} samples) and its folder?"
        if not confirmed(question, yes=args.yes):
            return 1
        delete_dataset(store, info.dataset_id)
    output_console().print(f"deleted dataset {info.dataset_id}")
    return 0


def _taxonomy(args: argparse.Namespace) -> int:
    from hierconsole.cli.taxonomy_build import ACTION, run_build_cub

    if args.dataset == ACTION:
        return run_build_cub(args.home, args.more)
    if args.more and set(args.more) <= {"-h", "--help"}:
        args.taxonomy_parser.print_help()
        return 0
    if args.more:
        raise InputError("taxonomy", f"unexpected arguments after the dataset: {' '.join(args.more)}")
    with open_for_reading(args.home) as store:
        info = read.get_dataset(store, args.dataset)
        taxonomy = read.dataset_taxonomy(store, args.dataset)
    console = output_console()
    console.print(
        f"[bold]{info.dataset_id}[/] taxonomy ({'/'.join(info.level_names)}), sha256 "
        f"{taxonomy.sha256()[:12]}"
    )
    for line in taxonomy.summary().lines():
        console.print(f"  {line}", highlight=False)
    codes = taxonomy.levels.codes
    edges = ", ".join(f"a {codes[j]} under one {codes[j + 1]}" for j in range(len(codes) - 1))
    console.print(
        f"  validation: [green]0 conflicts[/] ({edges}, no empty names, no duplicates; checked on import)"
    )
    return 0
