"""`hierconsole doctor [--repair]`: check a home's store; rebuild a damaged one from its backup and job folders."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.text import Text

from hierconsole.cli.output import output_console, print_grid
from hierconsole.errors import HierconsoleError
from hierconsole.locations import resolve_home
from hierconsole.plurals import counted
from hierconsole.present.grid import Column, Grid
from hierconsole.study.run import doctor


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "doctor",
        help="check the store (tables, schema, event logs, checkpoints, orphaned jobs); --repair rebuilds it",
    )
    d.add_argument(
        "--repair",
        action="store_true",
        help="rebuild the store from the newest backup and the job folders' event logs into a new file, "
        "keeping the damaged one aside as hierconsole.damaged-STAMP.duckdb",
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


def cmd_doctor(args: argparse.Namespace) -> int:
    home = resolve_home(args.home, create=False)
    if not home.is_dir():
        raise HierconsoleError(f"no home folder {home}: pass --home DIR naming an existing hierconsole home")
    console = output_console()
    if args.repair:
        done = doctor.repair(home)
        aside = f"; the damaged store is kept as {done.damaged}" if done.damaged else ""
        console.print(
            f"rebuilt {escape(str(done.rebuilt))} from the backup {escape(str(done.backup))} and "
            f"the event logs of {counted(done.replayed, 'job')}{escape(aside)}",
            highlight=False,
        )
        if done.lost:
            console.print(
                f"[yellow]warning:[/] not in the rebuilt store, as their studies were created after that "
                f"backup: {counted(len(done.lost), 'job folder')} ({escape(', '.join(done.lost))})",
                highlight=False,
            )
    report = doctor.examine(home)
    print_grid(console, findings_grid(report))
    return 0 if report.healthy else 1
