"""`hierconsole taxonomy build-cub classes.txt CHECKLIST.csv -o cub_taxonomy.csv`: the CUB taxonomy
from a checklist, with a per-class match report (see `hierconsole.datasets.checklist`).

Reached through `hierconsole taxonomy build-cub ...` (the `taxonomy` command hands its remaining
arguments here), so it has its own parser.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from hierconsole.cli.output import output_console
from hierconsole.datasets.checklist import (
    COLUMN_CANDIDATES,
    DEFAULT_THRESHOLD,
    METHODS,
    SPECIES,
    UNMATCHED,
    build_cub_files,
)
from hierconsole.errors import InputError

ACTION = "build-cub"


def _threshold(value: str) -> float:
    try:
        t = float(value)
    except ValueError:
        t = -1.0
    if not 0.0 < t <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a similarity in (0, 1], got {value!r}")
    return t


def parser() -> argparse.ArgumentParser:
    columns = "; ".join(f"{role}: {', '.join(names)}" for role, names in COLUMN_CANDIDATES.items())
    p = argparse.ArgumentParser(
        prog=f"hierconsole taxonomy {ACTION}",
        description=(
            "Build the CUB Class,Genus,Family taxonomy CSV that `import cub` takes from a bird checklist "
            "(e.g. the eBird/Clements CSV). Each CUB class is matched by normalised common name: exact, "
            "then your aliases, then fuzzy (difflib ratio >= --threshold). Genus = first word of the "
            "scientific name; family = the checklist family without a trailing '(gloss)'. Writes the "
            "taxonomy and a per-class report; refuses unmatched classes (unless --allow-unmatched) and "
            f"conflicts. Checklist columns are found by these header names (case-insensitive): {columns}; "
            f"rows are kept when their category is one of --categories (default {SPECIES})."
        ),
    )
    p.add_argument("classes", type=Path, help="CUB_200_2011/classes.txt")
    p.add_argument(
        "checklist", type=Path, help="checklist CSV (eBird/Clements or any with the columns above)"
    )
    p.add_argument("-o", "--output", type=Path, required=True, help="taxonomy CSV to write")
    p.add_argument(
        "--aliases", type=Path, help='JSON {"CUB class name": "checklist common or scientific name"}'
    )
    p.add_argument("--report", type=Path, help="match report CSV (default: OUTPUT with .report.csv)")
    p.add_argument("--threshold", type=_threshold, default=DEFAULT_THRESHOLD, help="fuzzy-match similarity")
    p.add_argument(
        "--allow-unmatched", action="store_true", help="write the taxonomy without unmatched classes"
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    for role in COLUMN_CANDIDATES:
        p.add_argument(f"--{role}-column", metavar="NAME", help=f"header of the {role} column")
    p.add_argument(
        "--categories", default=SPECIES, help="comma-separated checklist categories to match against"
    )
    return p


def run_build_cub(home: str | None, argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    out: Path = args.output
    report: Path = args.report or out.with_name(out.stem + ".report.csv")
    for path in (out, report):
        if not path.parent.is_dir():
            raise InputError(path, f"the folder {path.parent} does not exist", hint="create it first")
        if path.exists() and not args.overwrite:
            raise InputError(path, "the file exists", hint="pass --overwrite, or choose another path")
    columns = {role: getattr(args, f"{role}_column") for role in COLUMN_CANDIDATES}
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    built, taxonomy = build_cub_files(
        args.classes, args.checklist, out, report, args.aliases, columns=columns, categories=categories,
        threshold=args.threshold, allow_unmatched=args.allow_unmatched,
    )  # fmt: skip
    counts = built.counts()
    unmatched = [m for m in built.matches if m.method == UNMATCHED]
    console = output_console()
    console.print(
        f"[green]wrote[/] {escape(str(out))} and its report {escape(report.name)}: "
        + ", ".join(f"{counts[m]} {m}" for m in METHODS)
    )
    for line in taxonomy.summary().lines():
        console.print(f"  {escape(line)}")
    console.print("  0 conflicts (one genus per class, one family per class and per genus)")
    for fam, spellings in sorted(built.merged_families.items()):
        console.print(f"  merged family {escape(fam)}: {escape(' + '.join(spellings))}")
    for m in built.matches:
        if m.method == "fuzzy":
            assert m.species is not None
            console.print(
                f"  fuzzy {escape(m.cub_class)} -> {escape(m.species.common)} (score {m.score:.3f})"
            )
    for note in built.unused_aliases:
        console.print(f"  [yellow]note[/] {escape(note)}")
    for m in unmatched:
        console.print(f"  [yellow]left out[/] {escape(m.cub_class)}: {escape(m.note)}")
    return 0
