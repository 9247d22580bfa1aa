"""`hierconsole doctor [--repair]`: check a home's store; rebuild a damaged one from its backup and job folders."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hierconsole.cli.output import fitted, output_console
from hierconsole.errors import HierconsoleError
from hierconsole.locations import resolve_home
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


def findings_table(report: doctor.Report) -> Table:
    table = Table(title="store checks", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for f in report.findings:
        table.add_row(f.check, Text(f.status, "green" if f.status == doctor.OK else "bold red"), f.detail)
    return table


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
            f"{done.replayed} jobs' event logs{escape(aside)}",
            highlight=False,
        )
        if done.lost:
            console.print(
                f"[yellow]warning:[/] {len(done.lost)} job folders belong to studies created after that "
                f"backup and are not in the rebuilt store: {escape(', '.join(done.lost))}",
                highlight=False,
            )
    report = doctor.examine(home)
    console.print(fitted(console, findings_table(report)))
    return 0 if report.healthy else 1
