"""`hierconsole replicate --dry-run`: the paper's replication as its stage graph, each stage's decision
(done, run, stale, waiting) from the store and the inputs' content hashes, and the time left from the
stages' recorded wall times. Opens the store read-only and creates nothing."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from hierconsole.cli.reading import open_for_reading
from hierconsole.errors import HierconsoleError
from hierconsole.locations import resolve_home
from hierconsole.study.run.input_hashes import file_sha256, folder_sha256, text_sha256
from hierconsole.study.run.paper_stages import CUB, NABIRDS, paper_stages
from hierconsole.study.run.replication import load_records
from hierconsole.study.run.stage_graph import estimate_seconds, plan

SCALES = ("smoke", "paper")
MODELS = ("vits14", "vitb14", "vitl14")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replicate",
        help="the paper's replication as a stage graph: what is done, what is left (--dry-run)",
        description="Plan the paper's pipeline (extract, taxonomy, import, factorials, families, baselines, "
        "re-scoring, tables, report) from the dataset folders; each stage is keyed by its inputs' content "
        "hashes. Either dataset may be left out.",
    )
    p.add_argument("--cub", metavar="DIR", type=Path, help="the CUB_200_2011 folder")
    p.add_argument("--nabirds", metavar="DIR", type=Path, help="the nabirds folder")
    p.add_argument("--weights", metavar="PATH|none", required=True, help="backbone weights, or none (random)")
    p.add_argument("--seed", type=int, default=0, help="the replication's base seed (default 0)")
    p.add_argument("--model", choices=MODELS, default="vits14")
    taxonomy = p.add_mutually_exclusive_group()
    taxonomy.add_argument(
        "--checklist", metavar="CSV", type=Path, help="a bird checklist CSV for CUB's taxonomy"
    )
    taxonomy.add_argument("--cub-taxonomy", metavar="CSV", type=Path, help="a ready CUB taxonomy CSV")
    p.add_argument("--scale", choices=SCALES, default="paper")
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.set_defaults(func=cmd_replicate)


def _external(args: argparse.Namespace) -> dict[str, str]:
    """Validate every input and hash it; nothing is created before this succeeds."""
    if args.cub is None and args.nabirds is None:
        raise HierconsoleError(
            "replicate: give --cub DIR, --nabirds DIR or both (the datasets to replicate on)"
        )
    external = {"scale": args.scale, "seed": str(args.seed), "model": args.model, "paper_values": "v1"}
    for option, folder, key in (
        ("--cub", args.cub, "cub_images"),
        ("--nabirds", args.nabirds, "nabirds_images"),
    ):
        if folder is not None and not (folder / "images").is_dir():
            raise HierconsoleError(
                f"{option} {folder}: no images/ folder in it; pass the dataset's root folder"
            )
        if folder is not None:
            external[key] = folder_sha256(folder / "images")
    if args.cub is not None:
        labels = [args.cub / n for n in ("classes.txt", "image_class_labels.txt") if (args.cub / n).is_file()]
        external["cub_labels"] = text_sha256("".join(file_sha256(f) for f in labels))
        source = args.checklist or args.cub_taxonomy
        if source is not None and not source.is_file():
            raise HierconsoleError(
                f"{'--checklist' if args.checklist else '--cub-taxonomy'} {source}: no such file"
            )
        external["taxonomy_source"] = file_sha256(source) if source else "none"
    if args.nabirds is not None:
        hierarchy = args.nabirds / "hierarchy.txt"
        external["nabirds_hierarchy"] = file_sha256(hierarchy) if hierarchy.is_file() else "none"
    if args.weights == "none":
        external["weights"] = "none"
    elif not Path(args.weights).is_file():
        raise HierconsoleError(f"--weights {args.weights}: no such file; pass a weights file or none")
    else:
        external["weights"] = file_sha256(Path(args.weights))
    return external


def replication_id(args: argparse.Namespace) -> str:
    datasets = "+".join(d for d, given in ((CUB, args.cub), (NABIRDS, args.nabirds)) if given is not None)
    return f"{datasets}-{args.model}-{args.scale}-seed{args.seed}"


def cmd_replicate(args: argparse.Namespace) -> int:
    if not args.dry_run:
        raise HierconsoleError(
            "replicate: only --dry-run is available in this version (running the stages is not wired yet); "
            "run the studies with extract, import and run, or add --dry-run to see the plan"
        )
    external = _external(args)
    datasets = frozenset(d for d, given in ((CUB, args.cub), (NABIRDS, args.nabirds)) if given is not None)
    stages = paper_stages(datasets)
    rid = replication_id(args)
    out = Console(soft_wrap=True)
    if resolve_home(args.home, create=False).is_dir():
        with open_for_reading(args.home) as store:
            records = load_records(store, rid)
    else:  # a replication may start from no home at all: it will make one, and nothing is done yet
        records = {}
    planned = plan(stages, external, records)
    out.print(f"replication {escape(rid)}", highlight=False)
    for p in planned:
        record = records.get(p.stage.name)
        took = f"  (last {record.seconds:.1f}s)" if record and record.seconds is not None else ""
        out.print(f"  {p.stage.name:<16} {p.decision.value:<8}{took}", highlight=False)
    omitted = sorted({CUB, NABIRDS} - datasets)
    if omitted:
        out.print(f"omitted: the tables of {', '.join(omitted)} (no folder given)", highlight=False)
    timed = {name: r.seconds for name, r in records.items() if r.seconds is not None}
    if timed:
        out.print(
            f"time left (from the stages' recorded times): {estimate_seconds(planned, timed):.0f}s",
            highlight=False,
        )
    else:
        out.print("time left: unknown (no stage has run on this machine yet)", highlight=False)
    return 0
