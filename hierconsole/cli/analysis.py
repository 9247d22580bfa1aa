"""`hierconsole effects` and `hierconsole export`: arm tables, simple effects and table export.

Both work from a study in the store or, without any store, from a per-seed CSV the user brings.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from hierconsole.cli.output import output_console, print_grid
from hierconsole.cli.reading import open_for_reading, print_empty_levels
from hierconsole.cli.tracker import TRACKERS, add_arguments, cmd_export_tracker, is_tracker_export
from hierconsole.errors import HierconsoleError
from hierconsole.plurals import counted
from hierconsole.present.export import (
    FORMATS,
    MAX_PRECISION,
    STDOUT,
    STDOUT_FORMAT,
    check_format,
    export_table,
    write_table,
)
from hierconsole.present.json_output import json_text
from hierconsole.present.tables.effects import (
    arms_grid,
    baseline_contrasts_grid,
    baseline_names,
    effects_grid,
    effects_legend,
    factorial_names,
    redistribution_grid,
)
from hierconsole.present.tables.evidence import evidence_legend
from hierconsole.present.tables.families import pooled_effects_grid
from hierconsole.study import read
from hierconsole.study.db.storage import Store
from hierconsole.study.read.effects import SESOI_HELP, EffectsView, parse_sesoi
from hierconsole.study.read.per_seed_csv import csv_effects, csv_table_frame
from hierconsole.study.read.results import ANALYSIS_TABLES, FAMILY_TABLES, POSTHOC_TABLES, TABLES, check_table
from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS
from hierconsole.vocabulary import AGGREGATIONS, BASELINE_LEGEND, POSTHOC_NOTE

AGGREGATE_HELP = "report a post-hoc re-score's aggregation (after `hierconsole rescore STUDY --aggregate AGG`), labelled post-hoc"
NO_AGGREGATE = "--aggregate reads one study's re-score in the store\n  fix: give a STUDY, or leave out --aggregate"


def check_precision(digits: int | None) -> None:
    """`--precision` of the analysis commands: None (each table's default) or 0 to MAX_PRECISION."""
    if digits is not None and not 0 <= digits <= MAX_PRECISION:
        raise HierconsoleError(f"--precision {digits} is out of range\n  fix: use 0 to {MAX_PRECISION}")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "effects",
        help="arm table and simple effects (geometry, loss, interaction) of a study or a per-seed CSV",
        description="Mean ± sample SD per arm and the paired simple effects H_R-E_R, H_S-E_S, E_S-E_R, "
        "H_S-H_R and (H_S-E_S)-(H_R-E_R), per seed and across seeds.",
    )
    p.add_argument(
        "study", nargs="?", metavar="STUDY", help="study id in the store, or a family (its members' effects pooled)"
    )
    p.add_argument(
        "--from-csv",
        metavar="FILE",
        type=Path,
        help="per-seed CSV instead of a study: columns arm (ER/HR/ES/HS or E_R...), seed, one per metric",
    )
    p.add_argument(
        "--metric",
        metavar="NAME",
        action="append",
        help="metric column to analyse (repeatable; default: every numeric column)",
    )
    p.add_argument("--json", action="store_true", help="print the effects as JSON only")
    p.add_argument("--sesoi", metavar="DELTA", help=SESOI_HELP)
    p.add_argument("--aggregate", choices=AGGREGATIONS, help=AGGREGATE_HELP)
    p.add_argument(
        "--precision",
        type=int,
        metavar="N",
        default=None,
        help=f"decimals shown (default {ARM_DIGITS} for arms, {EFFECT_DIGITS} for effects)",
    )
    p.set_defaults(func=cmd_effects)

    names = ", ".join([*TABLES, *FAMILY_TABLES])
    e = subparsers.add_parser(
        "export",
        help="write a table (runs, metrics, arms, effects, ...) as CSV, Parquet, JSON, Markdown or LaTeX",
        description=f"Tables: {names}. Markdown and LaTeX show mean ± SD rounded to --precision; the "
        "other formats keep full precision.",
    )
    e.add_argument("table", metavar="TABLE", help=f"one of: {names}; or {', '.join(TRACKERS)} (a study's runs)")
    add_arguments(e)
    e.add_argument("--study", metavar="ID", help="study id (tables of one study)")
    e.add_argument("--family", metavar="ID", help=f"family id or name (family tables: {', '.join(FAMILY_TABLES)})")
    e.add_argument(
        "--from-csv",
        metavar="FILE",
        type=Path,
        help=f"compute {', '.join(ANALYSIS_TABLES)} from a per-seed CSV instead of the store",
    )
    e.add_argument("--metric", metavar="NAME", action="append", help="metric column(s) for --from-csv tables")
    e.add_argument("--aggregate", choices=AGGREGATIONS, help=f"{AGGREGATE_HELP} ({', '.join(POSTHOC_TABLES)})")
    e.add_argument(
        "--format",
        dest="fmt",
        metavar="FMT",
        help=f"one of: {', '.join(FORMATS)} (default: from the suffix of -o; {STDOUT_FORMAT} for -o -)",
    )
    e.add_argument(
        "-o", "--output", metavar="PATH",  # a str: Path("./-") would read as "-"; required of tables
        help="file to write, or - for standard output (csv unless --format says json, md or latex)",
    )
    e.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    e.add_argument("--precision", type=int, metavar="N", default=4, help="decimals in md/latex (default 4)")
    e.set_defaults(func=cmd_export)


# ---------------------------------------------------------------------------------------- effects


def cmd_effects(args: argparse.Namespace) -> int:
    """The effects screen of the study (the newest without STUDY), of a family, or of a per-seed CSV."""
    if args.study and args.from_csv:
        raise HierconsoleError("give either a STUDY or --from-csv FILE, not both")
    check_precision(args.precision)
    sesoi = parse_sesoi(args.sesoi)
    if args.aggregate and args.from_csv:
        raise HierconsoleError(NO_AGGREGATE)
    if args.from_csv:
        return _show_effects(args, csv_effects(args.from_csv, args.metric, sesoi=sesoi))
    # One open for the whole screen: every table comes from the same store (or the same live snapshot,
    # whose note is printed once).
    from hierconsole.study.read.report_inputs import is_family_ref

    with open_for_reading(args.home) as store:
        if args.study and is_family_ref(store, args.study):
            if args.aggregate:
                raise HierconsoleError(NO_AGGREGATE)
            return _family_effects(args, store, sesoi)
        study_id = read.resolve_study(store, args.study)  # no STUDY: the newest; an empty store says how
        view = read.study_effects(store, study_id, args.metric, aggregation=args.aggregate, sesoi=sesoi)
        code = _show_effects(args, view)
        if not args.json:
            print_empty_levels(store, study_id, output_console())
        return code


def _show_effects(args: argparse.Namespace, view: EffectsView) -> int:
    if args.json:
        # Plain stdout, not rich: the JSON must reach pipes byte-exact, without wrapping or colour.
        sys.stdout.write(json_text(view.to_json()))
        return 0
    arm_digits = ARM_DIGITS if args.precision is None else args.precision
    effect_digits = EFFECT_DIGITS if args.precision is None else args.precision
    print_effects(output_console(), view, arm_digits, effect_digits)
    return 0


def print_effects(console: Console, view: EffectsView, arm_digits: int, effect_digits: int) -> None:
    """The arm table with the baselines, the simple effects, the cells against the baselines and (with
    every level's mAP) the redistribution, each in the fullest form that fits, then the legends and what
    was left out."""
    if view.posthoc:
        console.print(f"[bold yellow]aggregation {view.aggregation}:[/] {POSTHOC_NOTE}", highlight=False)
    print_grid(console, arms_grid(view.arms, arm_digits, view.source))
    if factorial_names(view.effects):  # a study without the cells of any effect shows none
        print_grid(console, effects_grid(view.effects, effect_digits))
    if baseline_names(view.baseline_contrasts):
        print_grid(console, baseline_contrasts_grid(view.baseline_contrasts, effect_digits))
    if view.redistribution is not None:
        print_grid(console, redistribution_grid(view.redistribution, effect_digits, console.width))
    console.print(Text(view.factorial.legend, style="dim"))
    for line in effects_legend(view.effects):
        console.print(line)
    summaries = [e for by_name in (*view.effects.values(), *view.baseline_contrasts.values()) for e in by_name.values()]
    for line in evidence_legend(summaries):
        console.print(line)
    if view.baselines is not None and not view.baselines.is_empty():
        console.print(Text(BASELINE_LEGEND + "; <arm>_vs_<baseline> = <arm> - <baseline>", style="dim"))
    if view.omitted:
        console.print(f"[yellow]note:[/] {escape(view.omitted)}", highlight=False)


# ----------------------------------------------------------------------------------------- export


def cmd_export(args: argparse.Namespace) -> int:
    if is_tracker_export(args):
        return cmd_export_tracker(args)
    if args.output is None:
        raise HierconsoleError(f"export {args.table} needs -o PATH (a file, or - for standard output)")
    if args.table in FAMILY_TABLES or args.family:
        return _export_family_table(args)
    table = check_table(args.table)
    if args.from_csv:
        if args.study:
            raise HierconsoleError("give either --study or --from-csv FILE, not both")
        if args.aggregate:
            raise HierconsoleError(NO_AGGREGATE)
        if table not in ANALYSIS_TABLES:
            raise HierconsoleError(
                f"table {table!r} comes from the study store and cannot be computed from a CSV\n"
                f"  fix: with --from-csv, export one of {', '.join(ANALYSIS_TABLES)}"
            )

        # `study` is unused here, but mypy wants both variants of provider to have one signature.
        def provider(name: str, study: str | None) -> pl.DataFrame:
            return csv_table_frame(name, args.from_csv, args.metric)

    else:
        if args.metric:
            raise HierconsoleError("--metric applies to --from-csv tables only")
        def provider(name: str, study: str | None) -> pl.DataFrame:
            with open_for_reading(args.home) as store:
                return read.table_frame(store, name, read.resolve_study(store, study), args.aggregate)

    path, frame = export_table(
        table,
        provider,
        args.output,
        args.fmt,
        study_id=args.study,
        force=args.force,
        precision=args.precision,
    )
    if path is not None:  # standard output holds the table itself, nothing else
        print(f"wrote table {table} ({counted(frame.height, 'row')}) to {path}")
    return 0


def _export_family_table(args: argparse.Namespace) -> int:
    if args.table not in FAMILY_TABLES:
        raise HierconsoleError(
            f"table {args.table!r} is a study table; --family exports {', '.join(FAMILY_TABLES)}\n"
            f"  fix: use --study ID for {args.table}"
        )
    if not args.family or args.study or args.from_csv:
        raise HierconsoleError(f"table {args.table!r} needs --family FAMILY (and neither --study nor --from-csv)")
    if args.aggregate:
        raise HierconsoleError(NO_AGGREGATE)
    if args.table != "contrasts":
        return _export_outer_table(args)
    if args.metric and len(args.metric) > 1:
        raise HierconsoleError("--metric: give one metric for the contrasts table")
    from hierconsole.study.read.contrasts import DEFAULT_METRIC, metric_columns
    from hierconsole.study.read.families import family_contrasts_frame

    metric = args.metric[0] if args.metric else DEFAULT_METRIC
    metric_columns(metric)
    if args.output != STDOUT:
        check_format(args.fmt, args.output)
    with open_for_reading(args.home) as store:
        frame = family_contrasts_frame(store, args.family, metric=metric)
    path = write_table(frame, args.output, args.fmt, force=args.force, precision=args.precision)
    if path is not None:  # standard output holds the table itself, nothing else
        print(f"wrote table {args.table} ({counted(frame.height, 'row')}) to {path}")
    return 0


def _export_outer_table(args: argparse.Namespace) -> int:
    """outer-arms or outer-gains of an outer-split family: every mAP level and the hier score, per split."""
    from hierconsole.study.read.families import family_outer_frame

    if args.metric:
        raise HierconsoleError(f"--metric: table {args.table} holds every mAP level and the hier score; leave it out")
    if args.output != STDOUT:
        check_format(args.fmt, args.output)
    with open_for_reading(args.home) as store:
        frame = family_outer_frame(store, args.family, gains=args.table == "outer-gains")
    path = write_table(frame, args.output, args.fmt, force=args.force, precision=args.precision)
    if path is not None:  # standard output holds the table itself, nothing else
        print(f"wrote table {args.table} ({counted(frame.height, 'row')}) to {path}")
    return 0


def _family_effects(args: argparse.Namespace, store: Store, sesoi: float | None) -> int:
    """Each member's effects (averaged over its seeds) and their mean ± SD over members: the outer split as
    the unit, as the paper reads its outer-split studies."""
    from hierconsole.study.read.families import family_effects
    from hierconsole.vocabulary import HIER_METRIC

    if args.metric and len(args.metric) > 1:
        raise HierconsoleError("--metric: give one metric for a family's pooled effects")
    metric = args.metric[0] if args.metric else HIER_METRIC
    family, pooled = family_effects(store, args.study, metric=metric, sesoi=sesoi)
    if not pooled:  # e.g. members training different cells (an outer-split family with arms)
        where = (
            f"its arms over outer splits: `hierconsole families {family.name}`"
            if family.definition.get("outer") is not None
            else f"compare members with `hierconsole contrast {family.name}` or `contrast FAMILY:A FAMILY:B --arms`"
        )
        raise HierconsoleError(f"family {family.name}: its members have no effect of {metric} in common; {where}")
    if args.json:
        doc = {
            "family": family.family_id,
            "metric": metric,
            "effects": {name: e.to_json() for name, e in pooled.items()},
        }
        sys.stdout.write(json_text(doc))
        return 0
    digits = EFFECT_DIGITS if args.precision is None else args.precision
    title = f"{family.name}: effects of {metric} per member (mean over its seeds), pooled over members"
    print_grid(output_console(), pooled_effects_grid(title, [m.member for m in family.members], pooled, digits))
    return 0
