"""`hierconsole effects` and `hierconsole export`: arm tables, simple effects and table export.

Both work from a study in the store or, without any store, from a per-seed CSV the user brings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import polars as pl
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hierconsole.cli.output import fits, fitted, output_console
from hierconsole.cli.reading import open_for_reading, print_empty_levels
from hierconsole.errors import HierconsoleError
from hierconsole.factorial import EFFECTS
from hierconsole.study import read
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import (
    SimpleEffects,
    effects_json,
    omitted_text,
    seeds_of,
    simple_effects,
)
from hierconsole.study.analysis.frames import (
    ANALYSIS_TABLES,
    FAMILY_TABLES,
    TABLES,
    analysis_frame,
    check_table,
)
from hierconsole.study.analysis.per_seed_csv import load_effects_csv
from hierconsole.study.analysis.redistribution import Redistribution, can_redistribute, redistribution
from hierconsole.study.db.storage import Store
from hierconsole.study.report.writers import (
    FORMATS,
    MAX_PRECISION,
    STDOUT,
    check_format,
    export_table,
    write_table,
)
from hierconsole.vocabulary import ARM_LEGEND, ARMS, BASELINE_LEGEND, BASELINES, LEVELS, UNTRAINED_BASELINES

ARM_PRECISION = 4
EFFECT_PRECISION = 6
"""Display defaults: arm values as in paper Table 1, effects (often ~1e-3) as in Tables S7 and S11."""


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
    p.add_argument(
        "--precision",
        type=int,
        metavar="N",
        default=None,
        help=f"decimals shown (default {ARM_PRECISION} for arms, {EFFECT_PRECISION} for effects)",
    )
    p.set_defaults(func=cmd_effects)

    names = ", ".join([*TABLES, *FAMILY_TABLES])
    e = subparsers.add_parser(
        "export",
        help="write a table (runs, metrics, arms, effects, ...) as CSV, Parquet, JSON, Markdown or LaTeX",
        description=f"Tables: {names}. Markdown and LaTeX show mean ± SD rounded to --precision; the "
        "other formats keep full precision.",
    )
    e.add_argument("table", metavar="TABLE", help=f"one of: {names}")
    e.add_argument("--study", metavar="ID", help="study id (tables of one study)")
    e.add_argument("--family", metavar="ID", help="family id or name (family tables: contrasts)")
    e.add_argument(
        "--from-csv",
        metavar="FILE",
        type=Path,
        help=f"compute {', '.join(ANALYSIS_TABLES)} from a per-seed CSV instead of the store",
    )
    e.add_argument("--metric", metavar="NAME", action="append", help="metric column(s) for --from-csv tables")
    e.add_argument(
        "--format",
        dest="fmt",
        metavar="FMT",
        help=f"one of: {', '.join(FORMATS)} (default: from the suffix of -o)",
    )
    e.add_argument(
        "-o", "--output", metavar="PATH", required=True,  # a str: Path("./-") would read as "-"
        help="file to write, or - for standard output (csv, json, md, latex)",
    )
    e.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    e.add_argument("--precision", type=int, metavar="N", default=4, help="decimals in md/latex (default 4)")
    e.set_defaults(func=cmd_export)


# ------------------------------------------------------------------------------------------ store


def _per_seed(args: argparse.Namespace) -> tuple[pl.DataFrame, str, pl.DataFrame | None]:
    """The per-seed table, where it comes from, and the study's baseline arms (None from a CSV)."""
    if args.study and args.from_csv:
        raise HierconsoleError("give either a STUDY or --from-csv FILE, not both")
    if args.from_csv:
        return load_effects_csv(args.from_csv, args.metric), str(args.from_csv), None
    # No STUDY means the newest study in the store; an empty store says how to get one.
    with open_for_reading(args.home) as store:
        study_id = read.resolve_study(store, args.study)
        table = read.per_seed(store, study_id)
        baselines = read.baselines(store, study_id)
    return table, f"study {args.study or '(newest)'}", baselines


# ---------------------------------------------------------------------------------------- effects


def cmd_effects(args: argparse.Namespace) -> int:
    if args.study and not args.from_csv:
        with open_for_reading(args.home) as store:
            if _is_family_only(store, args.study):
                return _family_effects(args, store)
    per_seed, source, baselines = _per_seed(args)
    effects = simple_effects(per_seed, args.metric, source=source, baselines=baselines)
    omitted = omitted_text(per_seed["arm"].to_list())
    if args.json:
        # Plain stdout, not rich: the JSON must reach pipes byte-exact, without wrapping or colour; the
        # note on omitted effects goes to stderr so the JSON's shape stays that of a full study.
        sys.stdout.write(json.dumps(effects_json(effects), indent=2) + "\n")
        if omitted:
            print(f"note: {omitted}", file=sys.stderr)
        return 0
    if args.precision is not None and not 0 <= args.precision <= MAX_PRECISION:
        raise HierconsoleError(
            f"--precision {args.precision} is out of range\n  fix: use 0 to {MAX_PRECISION}"
        )
    arm_digits = ARM_PRECISION if args.precision is None else args.precision
    effect_digits = EFFECT_PRECISION if args.precision is None else args.precision
    console = output_console()
    print_results(
        console,
        per_seed,
        effects,
        source,
        arm_digits,
        effect_digits,
        compact_digits=ARM_PRECISION if args.precision is None else args.precision,
        baselines=baselines,
    )
    if omitted:
        console.print(f"[yellow]note:[/] {escape(omitted)}", highlight=False)
    if not args.from_csv:
        with open_for_reading(args.home) as store:
            print_empty_levels(store, read.resolve_study(store, args.study), console)
    return 0


def print_results(
    console: Console,
    per_seed: pl.DataFrame,
    effects: SimpleEffects,
    source: str,
    arm_digits: int,
    effect_digits: int,
    *,
    compact_digits: int,
    metrics: list[str] | None = None,
    baselines: pl.DataFrame | None = None,
) -> None:
    """The arm table (with the study's baseline arms, when it has any), the simple effects and (with
    every level's mAP) the redistribution, each in the fullest form that fits the console, then the
    legends of arms and effects."""
    arms = arm_table(per_seed, metrics or list(effects), source=source, baselines=baselines)
    print_arms(console, arms, arm_digits, source)
    if any(effects[m] for m in effects):  # a study without the cells of any effect shows none
        console.print(
            fitted(
                console,
                effects_rich_table(effects, effect_digits),
                effects_rich_table(effects, compact_digits, compact=True),
            )
        )
    every_level = all(f"{level}_mAP" in per_seed.columns for level in LEVELS)
    if every_level and (metrics is None or "leaf_mAP" in effects) and can_redistribute(per_seed):
        result = redistribution(per_seed, "mAP", source=source)
        console.print(
            fitted(
                console,
                redistribution_rich_table(result, effect_digits),
                redistribution_rich_table(result, compact_digits, compact=True),
            )
        )
    console.print(Text(ARM_LEGEND, style="dim"))
    console.print(Text("effects: " + ", ".join(f"{n} = {d}" for n, d in EFFECTS.items()), style="dim"))
    if baselines is not None and not baselines.is_empty():
        console.print(Text(BASELINE_LEGEND + "; <arm>_vs_<baseline> = <arm> - <baseline>", style="dim"))


def _signed(value: float, digits: int) -> Text:
    style = "green" if value > 0 else "red" if value < 0 else ""
    return Text(f"{value:+.{digits}f}", style=style)


def _mean_sd(mean: float, sd: float | None, digits: int, *, signed: bool = False, compact: bool = False) -> Text:
    text = _signed(mean, digits) if signed else Text(f"{mean:.{digits}f}")
    text.append((" (n=1)" if compact else " (n=1, no SD)") if sd is None else f" ± {sd:.{digits}f}")
    return text


def _seed_count(k: int, n: int, *, compact: bool = False) -> Text:
    style = "green" if k == n else "red" if k == 0 else "yellow"
    return Text(f"{k}/{n}" if compact else f"{k}/{n} seeds", style=style)


def compact_box(compact: bool) -> dict:
    """A compact table has no vertical rules: the columns keep their numbers whole in 80 columns."""
    return {"box": box.SIMPLE_HEAD, "pad_edge": False, "show_edge": False, "padding": (0, 0, 0, 1)} if compact else {}


def print_arms(console: Console, arms: pl.DataFrame, digits: int, source: str) -> None:
    """The arm table in the fullest form that fits; when even the compact one is too wide with the
    baseline columns, the baselines follow in a table of their own."""
    variants = [arm_rich_table(arms, digits, source), arm_rich_table(arms, digits, source, compact=True)]
    base = arms.filter(pl.col("arm").is_in(BASELINES))
    if base.is_empty() or any(fits(console, t) for t in variants):
        console.print(fitted(console, *variants))
        return
    trained = arms.filter(pl.col("arm").is_in(ARMS))
    console.print(
        fitted(console, arm_rich_table(trained, digits, source), arm_rich_table(trained, digits, source, compact=True))
    )
    console.print(arm_rich_table(base, digits, source, compact=True))


def arm_rich_table(arms: pl.DataFrame, digits: int, source: str, *, compact: bool = False) -> Table:
    """Trained arms as mean ± SD over seeds; baseline arms after them: an untrained one as its one value
    (no SD: it does not depend on the training seed, BASELINE_LEGEND), a trained one (HIER-style) as
    mean ± SD over its seeds."""
    present = [a for a in (*ARMS, *BASELINES) if a in set(arms["arm"].to_list())]
    n_of = {r["arm"]: r["n"] for r in arms.iter_rows(named=True) if r["arm"] not in UNTRAINED_BASELINES}
    table = Table(title=f"Arms: mean ± sample SD over seeds ({source})", title_justify="left", **compact_box(compact))
    table.add_column("metric", no_wrap=True)
    for arm in present:
        header = f"{arm} (n={n_of[arm]})" if arm in n_of else f"{arm} (no SD)"
        table.add_column(arm if compact else header, justify="right", no_wrap=True, style="" if arm in ARMS else "cyan")
    cells = {(r["arm"], r["metric"]): r for r in arms.iter_rows(named=True)}
    for metric in dict.fromkeys(arms["metric"].to_list()):
        row = [Text(metric)]
        for arm in present:
            r = cells[(arm, metric)]
            if arm in n_of:
                row.append(_mean_sd(r["mean"], r["sd"], digits, compact=compact))
            else:
                row.append(Text(f"{r['mean']:.{digits}f}"))
        table.add_row(*row)
    if not any(arm in ARMS for arm in present):
        table.title = "Baselines" if n_of else "Baselines (no SD)"
    elif compact and len(set(n_of.values())) == 1:
        table.title = f"Arms: mean ± sample SD over {next(iter(n_of.values()))} seeds ({source})"
    return table


def effects_rich_table(effects: SimpleEffects, digits: int, *, compact: bool = False) -> Table:
    """Compact: no definition column (the legend line gives them) and seed counts without the word."""
    seeds = seeds_of(effects)
    table = Table(title="Simple effects, paired within seed", title_justify="left", **compact_box(compact))
    table.add_column("metric", no_wrap=True)
    table.add_column("effect", no_wrap=True)
    if not compact:
        table.add_column("definition", no_wrap=True, style="dim")
    for s in seeds:
        table.add_column(str(s), justify="right", no_wrap=True)
    table.add_column("mean ± SD", justify="right", no_wrap=True)
    table.add_column(">0 seeds" if compact else "positive", justify="right", no_wrap=True)
    metrics = list(effects)
    for i, metric in enumerate(metrics):
        names = list(effects[metric])
        for j, name in enumerate(names):
            e = effects[metric][name]
            table.add_row(
                metric if j == 0 else "",
                name,
                *(() if compact else (e.definition,)),
                *(_signed(e.per_seed[s], digits) for s in seeds),
                _mean_sd(e.mean, e.sd, digits, signed=True, compact=compact),
                _seed_count(e.positive_seeds, e.n_seeds, compact=compact),
                end_section=j == len(names) - 1 and i < len(metrics) - 1,
            )
    return table


def redistribution_rich_table(result: Redistribution, digits: int, *, compact: bool = False) -> Table:
    table = Table(
        title=f"Level-wise redistribution of {result.metric} (finer levels down, highest level up?)",
        title_justify="left",
        **compact_box(compact),
    )
    table.add_column("contrast", no_wrap=True)
    for level in LEVELS:
        table.add_column(level, justify="right", no_wrap=True)
    table.add_column("pattern", no_wrap=True)
    for contrast, by_level in result.contrasts.items():
        flag = result.pattern[contrast]
        seeds = f"{result.seeds_with_pattern[contrast]}/{result.n_seeds}" + ("" if compact else " seeds")
        table.add_row(
            EFFECTS[contrast],
            *(
                _mean_sd(by_level[level].mean, by_level[level].sd, digits, signed=True, compact=compact)
                for level in LEVELS
            ),
            Text(f"{'yes' if flag else 'no'} ({seeds})", style="bold" if flag else "dim"),
        )
    return table


# ----------------------------------------------------------------------------------------- export


def cmd_export(args: argparse.Namespace) -> int:
    if args.table in FAMILY_TABLES or args.family:
        return _export_family_table(args)
    table = check_table(args.table)
    if args.from_csv:
        if args.study:
            raise HierconsoleError("give either --study or --from-csv FILE, not both")
        if table not in ANALYSIS_TABLES:
            raise HierconsoleError(
                f"table {table!r} comes from the study store and cannot be computed from a CSV\n"
                f"  fix: with --from-csv, export one of {', '.join(ANALYSIS_TABLES)}"
            )

        # `study` is unused here, but mypy wants both variants of provider to have one signature.
        def provider(name: str, study: str | None) -> pl.DataFrame:
            per_seed = load_effects_csv(args.from_csv, args.metric)
            return analysis_frame(name, per_seed, metrics=args.metric, source=str(args.from_csv))

    else:
        if args.metric:
            raise HierconsoleError("--metric applies to --from-csv tables only")
        def provider(name: str, study: str | None) -> pl.DataFrame:
            with open_for_reading(args.home) as store:
                return read.table_frame(store, name, read.resolve_study(store, study))

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
        print(f"wrote table {table} ({frame.height} rows) to {path}")
    return 0


def _export_family_table(args: argparse.Namespace) -> int:
    if args.table not in FAMILY_TABLES:
        raise HierconsoleError(
            f"table {args.table!r} is a study table; --family exports {', '.join(FAMILY_TABLES)}\n"
            f"  fix: use --study ID for {args.table}"
        )
    if not args.family or args.study or args.from_csv:
        raise HierconsoleError(f"table {args.table!r} needs --family FAMILY (and neither --study nor --from-csv)")
    if args.metric and len(args.metric) > 1:
        raise HierconsoleError("--metric: give one metric for the contrasts table")
    from hierconsole.study.analysis.contrasts import DEFAULT_METRIC, contrasts_frame, metric_columns
    from hierconsole.study.read.families import family_contrasts

    metric = args.metric[0] if args.metric else DEFAULT_METRIC
    metric_columns(metric)
    if args.output != STDOUT:
        check_format(args.fmt, args.output)
    with open_for_reading(args.home) as store:
        _, contrasts = family_contrasts(store, args.family, metric=metric)
    frame = contrasts_frame(contrasts)
    path = write_table(frame, args.output, args.fmt, force=args.force, precision=args.precision)
    if path is not None:  # standard output holds the table itself, nothing else
        print(f"wrote table {args.table} ({frame.height} rows) to {path}")
    return 0


def _is_family_only(store: Store, ref: str) -> bool:
    """A family name or id that is not a study's id or name: `effects FAMILY` pools its members' effects."""
    from hierconsole.study.read.report_inputs import is_family_ref

    return is_family_ref(store, ref)


def _family_effects(args: argparse.Namespace, store: Store) -> int:
    """Each member's effects (averaged over its seeds) and their mean ± SD over members: the outer split as
    the unit, as the paper reads its outer-split studies."""
    from hierconsole.study.read.families import family_effects
    from hierconsole.vocabulary import HIER_METRIC

    if args.metric and len(args.metric) > 1:
        raise HierconsoleError("--metric: give one metric for a family's pooled effects")
    metric = args.metric[0] if args.metric else HIER_METRIC
    family, pooled = family_effects(store, args.study, metric=metric)
    if args.json:
        doc = {
            "family": family.family_id,
            "metric": metric,
            "effects": {
                name: {
                    "per_member": e.per_study,
                    "mean": e.mean,
                    "sd": e.sd,
                    "positive_members": e.positive,
                    "n_members": e.n,
                    **e.evidence.columns(),
                }
                for name, e in pooled.items()
            },
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    digits = EFFECT_PRECISION if args.precision is None else args.precision
    members = [m.member for m in family.members]
    table = Table(
        title=f"{family.name}: effects of {metric} per member (mean over its seeds), pooled over members",
        title_justify="left",
    )
    table.add_column("effect", no_wrap=True)
    table.add_column("definition", no_wrap=True, style="dim")
    for m in members:
        table.add_column(m, justify="right", no_wrap=True)
    table.add_column("mean ± SD", justify="right", no_wrap=True)
    table.add_column("positive", justify="right", no_wrap=True)
    for name, e in pooled.items():
        table.add_row(
            name,
            e.definition,
            *(_signed(e.per_study[m], digits) for m in members),
            _mean_sd(e.mean, e.sd, digits, signed=True),
            Text(f"{e.positive}/{e.n} members"),
        )
    output_console().print(table)
    return 0
