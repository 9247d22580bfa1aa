"""`hierconsole doctor [--repair]`: check a home's store; rebuild a damaged one from its backup and job folders."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from hierconsole.cli.output import output_console, print_grid
from hierconsole.errors import HierconsoleError
from hierconsole.locations import resolve_home
from hierconsole.plurals import counted
from hierconsole.present.grid import Column, Grid
from hierconsole.study.commands import doctor


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "doctor",
        help="check the store (tables, schema, event logs, checkpoints, orphaned jobs); --repair rebuilds it",
    )
    d.add_argument(
        "--repair",
        action="store_true",
        help="rebuild a damaged or missing store from the newest readable backup, the studies' records and "
        "the job folders' event logs into a new file, keeping the damaged one aside as "
        "hierconsole.damaged-STAMP.duckdb; refused while another process holds the store; a sound store "
        "is left alone",
    )
    d.add_argument(
        "--force",
        action="store_true",
        help="with --repair: rebuild a sound store all the same, saying first what the rebuilt one lacks",
    )
    d.set_defaults(func=cmd_doctor)


def findings_grid(report: doctor.Report) -> Grid:
    grid = Grid(
        "store checks",
        [Column("check", numeric=False), Column("status", numeric=False), Column("detail", numeric=False, foldable=True)],
    )
    for f in report.findings:
        grid.add_row(f.check, Text(f.status, "green" if f.status == doctor.OK else "bold red"), f.detail)
    return grid


def _announce(console: Console, rebuild: doctor.Rebuild) -> None:
    """What a repair says before it puts the rebuilt store in place."""
    for note in rebuild.skipped:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    if rebuild.drops is not None:
        dropped = "; ".join(rebuild.drops) or "nothing (every study and dataset, and as many rows of each table)"
        console.print(f"compared with the current store, the rebuilt one will drop: {escape(dropped)}", soft_wrap=True)


def cmd_doctor(args: argparse.Namespace) -> int:
    home = resolve_home(args.home, create=False)
    if not home.is_dir():
        raise HierconsoleError(f"no home folder {home}: pass --home DIR naming an existing hierconsole home")
    if args.force and not args.repair:
        raise HierconsoleError("--force only goes with --repair (`hierconsole doctor --repair --force`)")
    console = output_console()
    if args.repair:
        done = doctor.repair(home, force=args.force, announce=lambda rebuild: _announce(console, rebuild))
        if isinstance(done, doctor.Untouched):
            console.print(
                f"the store {escape(str(done.store))} is healthy (it opens and every table reads in full): "
                f"nothing was done (`hierconsole doctor` lists every check; `doctor --repair --force` "
                f"rebuilds it from the newest backup all the same)",
                soft_wrap=True,
            )
            return 0
        rebuild = done.done
        aside = f"; the store it replaced is kept as {done.damaged}" if done.damaged else ""
        console.print(
            f"rebuilt {escape(str(done.rebuilt))} from the backup {escape(str(rebuild.backup))} and "
            f"the event logs of {counted(rebuild.replayed, 'job')}{escape(aside)}",
            soft_wrap=True,
        )
        if rebuild.restored:
            console.print(
                f"restored from their records, as the backup was taken before them: {escape(', '.join(rebuild.restored))}",
                soft_wrap=True,
            )
        if rebuild.lost:
            console.print(
                f"[yellow]warning:[/] not in the rebuilt store, as the backup was taken before them and their "
                f"folders cannot restore them: {escape('; '.join(rebuild.lost))}; their folders are kept",
                soft_wrap=True,
            )
    report = doctor.examine(home)
    print_grid(console, findings_grid(report))
    return 0 if report.healthy else 1
