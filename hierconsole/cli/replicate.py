"""`hierconsole replicate`: the paper from the dataset folders to every table beside the paper's values.

Options parsed here, the work in `study.commands.replicate` (each stage keyed by its inputs' content
hashes and recorded in the store: a re-run continues where the last stopped, never redoes a finished stage,
and names a changed input; `--redo STAGE` re-runs it). `--dry-run` prints the plan and the time left.
Without a terminal the live lines are plain start/done lines, so nothing is redrawn into a log.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.text import Text

from hierconsole.cli.arguments import positive_int
from hierconsole.extraction.architectures import ARCHITECTURES, DEFAULT_MODEL
from hierconsole.plurals import counted
from hierconsole.study.commands import replicate
from hierconsole.study.commands.replicate import (
    DATASETS,
    DEFAULT_SEED,
    DEFAULT_STAGES_AT_ONCE,
    LIGHT_STAGES,
    PAPER,
    SCALES,
    Decision,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replicate",
        help="reproduce the paper: extract, import, every study and family, the tables and the report",
        description="Run the paper's pipeline (extract, taxonomy, import, factorials with tuning, families, "
        "baselines, post-hoc re-scoring, tables, report) from the dataset folders. Each stage is keyed by its "
        "inputs' content hashes and recorded in the store: a re-run continues where the last stopped and never "
        "redoes a finished stage. Either dataset may be left out (its tables are then named as omitted).",
    )
    p.add_argument("--cub", metavar="DIR", type=Path, help="the CUB_200_2011 folder")
    p.add_argument("--nabirds", metavar="DIR", type=Path, help="the nabirds folder")
    p.add_argument("--weights", metavar="PATH|none", required=True, help="backbone weights, or none (random)")
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="seed of random weights with --weights none (default 0)"
    )
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="MODEL",
        help=f"{', '.join(ARCHITECTURES)} (default {DEFAULT_MODEL}, the paper's), or a .json of Dinov2Config fields",
    )
    taxonomy = p.add_mutually_exclusive_group()
    taxonomy.add_argument(
        "--checklist", metavar="CSV", type=Path, help="a bird checklist CSV to build CUB's taxonomy from"
    )
    taxonomy.add_argument("--cub-taxonomy", metavar="CSV", type=Path, help="a ready CUB taxonomy CSV")
    p.add_argument("--aliases", metavar="JSON", type=Path, help="with --checklist: CUB class name aliases")
    p.add_argument(
        "--scale",
        choices=SCALES,
        default=PAPER,
        help="paper: the protocol unchanged (default); smoke: every stage and table with budgets cut to minutes",
    )
    p.add_argument("--out", metavar="DIR", type=Path, help="where the tables go (default: inside the home)")
    p.add_argument(
        "--redo",
        metavar="STAGE",
        action="append",
        default=[],
        help="run this stage again, and every stage after it (repeatable); complete studies and features "
        "of unchanged inputs are found and kept",
    )
    p.add_argument("--executor", choices=("local", "ray"), help="where the studies' jobs run (as for `run`)")
    p.add_argument("--ray-address", metavar="ADDRESS", help="with --executor ray: the cluster (as for `run`)")
    p.add_argument(
        "--stages-at-once",
        metavar="N",
        type=positive_int,
        default=DEFAULT_STAGES_AT_ONCE,
        help="stages that may run at the same time (default %(default)s); those that write the store "
        "always run one after another, so this lets an extraction run beside them",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and the time left; creates no dataset or study (stores this machine's calibration)",
    )
    p.set_defaults(func=cmd_replicate)


def cmd_replicate(args: argparse.Namespace) -> int:
    prepared = replicate.prepare(args, args.home)
    out = Console(soft_wrap=True)
    then = "to be rebuilt" if args.dry_run else "rebuilt"
    for stage, file in prepared.gone.items():
        out.print(f"{stage}: {escape(file)} is not in {escape(str(prepared.tables_out))} as it was written: {then}", highlight=False)
    if args.dry_run:
        _print_plan(out, prepared, replicate.dry_run(args, prepared))
        return 0
    from hierconsole.cli.progress import print_backup_note
    from hierconsole.present.report.output import write_report_of
    from hierconsole.present.report.replication_tables import write_tables

    writers = replicate.Writers(tables=write_tables, report=lambda inputs, path: write_report_of(inputs, path, force=True))
    logs: dict[str, Any] = {}
    progress = StageProgress(out, [s.name for s in prepared.stages], logs)
    started = time.monotonic()
    with progress:
        outcome = replicate.run(args, prepared, on_stage=progress.stage, on_warning=progress.warn, logs=logs, writers=writers)
    ran = counted(len(outcome.ran), "stage")
    out.print(f"replication {escape(prepared.replication_id)}: {ran} ran in {time.monotonic() - started:.0f}s", highlight=False)
    if outcome.stale:
        out.print(
            f"changed inputs: {', '.join(outcome.stale)} (and what follows them) kept; "
            f"run again with --redo {outcome.stale[0]} to rebuild",
            highlight=False,
        )
    out.print(f"tables: {escape(str(prepared.tables_out))} (index.md lists them)", highlight=False)
    print_backup_note(prepared.home, out)  # the stages wrote the store: said here, at the very end
    return 0


def _jobs(stage: str, work: Any) -> str:
    if stage in LIGHT_STAGES:
        return "in this process"
    jobs = sum(p.jobs for p in work.phases)
    parts = [counted(jobs, "job")] if jobs else []
    if work.images:
        parts.append(counted(work.images, "image"))
    commands = work.commands + work.torch_commands
    if commands:
        parts.append(counted(commands, "command"))
    return ", ".join(parts) or "in process"


def _print_plan(out: Console, p: replicate.Prepared, dry: replicate.DryRun) -> None:
    say = lambda text: out.print(text, highlight=False)  # noqa: E731
    say(f"replication {escape(p.replication_id)}")
    by_stage = {s.stage: s for s in dry.estimate.stages}
    for planned in dry.planned:
        name, record, left = planned.stage.name, p.records.get(planned.stage.name), by_stage.get(planned.stage.name)
        took = f"last {record.seconds:.1f}s" if record and record.seconds is not None else ""
        guess = f"~{left.seconds:.0f}s {left.describe()}" if left else "-"
        say(f"  {name:<18} {planned.decision.value:<8} {_jobs(name, dry.work[name]):<32} {guess:<34} {took}")
    kept = sorted(replicate.datasets_of_stages(p.carried))
    if kept:
        say(
            f"carried: the finished studies of {', '.join(kept)} in this replication fill its tables "
            "(its folder was not given, so its stages are not checked again)"
        )
    omitted = sorted(set(DATASETS) - p.datasets - set(kept))
    if omitted:
        say(f"omitted: the tables of {', '.join(omitted)} (no folder given)")
    stale = [s.stage.name for s in dry.planned if s.decision == Decision.STALE]
    if stale:
        say(f"changed inputs: {', '.join(stale)} finished under other inputs; kept until --redo names them")
    say(f"time left on this machine: about {dry.estimate.total:.0f}s")
    c = dry.calibrated
    when = "measured now" if c.measured_now else f"measured {c.measured_at:%Y-%m-%d %H:%M}"
    u = c.units
    say(
        f"calibration ({when}, {u.cores} cores): worker start-up {u.worker_start:.2f}s, {u.cell_update * 1e3:.2f} ms "
        f"per cell-update, {u.comparison * 1e9:.1f} ns per query x gallery pair, {u.image * 1e3:.0f} ms per image"
    )
    say(
        f"stored in {escape(str(p.home))}: this machine's calibration and the plan's counted work "
        "(no dataset or study was created)"
    )


class StageProgress:
    """One live line per running stage (its time and its log's last line) under a whole-pipeline bar."""

    def __init__(self, console: Console, stages: Sequence[str], logs: Mapping[str, Any]) -> None:
        self.console = console
        self.stages = list(stages)
        self.logs = logs
        self.running: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        """Each finished stage's wall time, in the order they finished."""
        self.live: Live | None = None

    def __enter__(self) -> StageProgress:
        if self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=4, transient=True, get_renderable=self._render)
            self.live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.live is not None:
            self.live.__exit__(kind, exc, tb)

    def stage(self, name: str, finished: bool) -> None:
        """A stage started (finished False) or finished."""
        now = time.monotonic()
        if not finished:
            self.running[name] = now
            self._say(f"{name}: started")
        else:
            self.seconds[name] = now - self.running.pop(name, now)
            self._say(f"{name}: done in {self.seconds[name]:.1f}s")

    def warn(self, text: str) -> None:
        self.console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False)

    def _say(self, text: str) -> None:
        # Finished and started stages scroll above the live lines; without a terminal they are the log.
        self.console.print(escape(text), highlight=False)

    def _render(self) -> Group:
        now = time.monotonic()
        total = len(self.stages)
        lines: list[Text | ProgressBar] = []
        for name, since in list(self.running.items()):  # stages start and end meanwhile
            log = self.logs.get(name)
            last = (log.last if log else "")[:_LINE]
            lines.append(Text(f"{name:<18} {now - since:6.0f}s  {last}"))
        bar = ProgressBar(total=total, completed=len(self.seconds), width=30)
        mean = sum(self.seconds.values()) / len(self.seconds) if self.seconds else None
        left = total - len(self.seconds)
        eta = f", about {mean * left:.0f}s left at this pace" if mean is not None and left else ""
        lines += [bar, Text(f"{len(self.seconds)} of {total} stages done{eta}")]
        return Group(*lines)


_LINE = 70
