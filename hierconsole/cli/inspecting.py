"""`hierconsole studies|runs|audit`: what the store holds, read without running anything."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape

from hierconsole.cli.output import output_console, print_grid
from hierconsole.cli.reading import open_for_reading
from hierconsole.errors import StoreBusyError, StoreReadOnlyError
from hierconsole.present.render import fits
from hierconsole.present.tables.studies import audits_grid, runs_grid, selection_grid, studies_grid
from hierconsole.study import read
from hierconsole.study.db.storage import Store


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("studies", help="list studies")
    s.set_defaults(func=cmd_studies)

    j = sub.add_parser("runs", help="jobs and runs with their states")
    j.add_argument("study", nargs="?", help="study id or name (default: all)")
    j.set_defaults(func=cmd_runs)

    a = sub.add_parser("audit", help="fairness and leakage checks of a study")
    a.add_argument("study", nargs="?", help="study id or name (default: newest)")
    a.add_argument("--recheck", action="store_true", help="recompute the checks from the stored evidence")
    a.set_defaults(func=cmd_audit)


def cmd_studies(args: argparse.Namespace) -> int:
    with open_for_reading(args.home) as store:
        studies = read.list_studies(store)
    print_grid(output_console(), studies_grid(studies))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    with open_for_reading(args.home) as store:
        study_id = read.resolve_study(store, args.study) if args.study else None
        jobs = read.job_rows(store, study_id)
        durations = read.selected_epochs(store, study_id) if study_id else []
        score = read.get_study(store, study_id).preset.training.selection_score if durations and study_id else ""
    console = output_console()
    full = runs_grid(jobs, "runs")
    if fits(full, console.width) or not jobs:
        print_grid(console, full)
    else:
        # Too wide for the terminal: one table per study, titled by it, its jobs by their ids within it.
        for sid in dict.fromkeys(j.study_id for j in jobs):
            print_grid(console, runs_grid([j for j in jobs if j.study_id == sid], f"runs of {sid}", short=True))
    if durations:
        # A study that selects its epoch: the one duration each arm's seeds were all scored at.
        print_grid(console, selection_grid(durations, score))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from hierconsole.study.commands import save_audits

    with open_for_reading(args.home) as store:
        study_id = read.resolve_study(store, args.study)
        checks = [] if args.recheck else read.stored_audits(store, study_id)
        computed = not checks
        if computed:
            checks = read.run_audits(store, study_id)
    if computed:
        # Saving the recomputed checks needs the store for writing; a held or read-only store still
        # shows them, and says they were not saved.
        try:
            with Store(args.home) as writable:
                save_audits(writable, study_id, checks)
        except (StoreBusyError, StoreReadOnlyError) as exc:
            Console(stderr=True, soft_wrap=True).print(
                f"[yellow]note:[/] the checks were computed but not saved: {escape(str(exc))}", highlight=False
            )
    console = output_console()
    console.print(f"study [bold]{study_id}[/]")
    print_grid(console, audits_grid(checks))
    return 0 if all(c.ok for c in checks) else 1
