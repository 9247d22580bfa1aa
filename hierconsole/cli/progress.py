"""How a running study shows in the terminal: one live line per job (epochs, losses) and the Ctrl-C
that cancels, driving the orchestrator until the studies settle."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Column
from rich.text import Text

from hierconsole.contract import events as ev
from hierconsole.errors import INTERRUPTED_EXIT, TERMINATED_EXIT, StoreWriteError
from hierconsole.factorial import OBJECTIVE_CODES, cells_in_order, objective_code
from hierconsole.locations import resolve_home
from hierconsole.plurals import counted
from hierconsole.study import read
from hierconsole.study.commands import Orchestrator, ProblemCallback
from hierconsole.study.db.storage import Store


class JobProgress:
    """Rich progress bars, one per job: epoch (or units scored), latest losses per cell, ETA."""

    def __init__(self, store: Store, console: Console):
        self.store = store
        self.progress = Progress(
            TextColumn("{task.fields[job]}", style="bold", table_column=Column(no_wrap=True)),
            BarColumn(bar_width=10),
            MofNCompleteColumn(table_column=Column(no_wrap=True)),
            TextColumn("{task.fields[state]}", table_column=Column(no_wrap=True)),
            TimeRemainingColumn(table_column=Column(no_wrap=True)),
            # Last, so in a narrow terminal the losses wrap under themselves and nothing else is cut.
            TextColumn("{task.fields[losses]}", table_column=Column(overflow="fold")),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, Any] = {}

    def on_problem(self, job_id: str, problem: ev.LineProblem) -> None:
        problem_printer(self.progress.console)(job_id, problem)

    def on_events(self, job_id: str, events: list[ev.Event]) -> None:
        """Warn of every checkpoint a resumed job skipped, and of a restart from scratch."""
        for e in events:
            if isinstance(e, ev.Resume) and e.notes:
                for note in e.notes:
                    self.progress.console.print(
                        f"[yellow]warning:[/] job {escape(job_id)}: {escape(note)}", highlight=False
                    )

    def refresh(self, study_ids: list[str]) -> None:
        for study_id in study_ids:
            for job in read.job_rows(self.store, study_id):
                losses = losses_label(job.losses)
                if job.job_id not in self.tasks:
                    self.tasks[job.job_id] = self.progress.add_task(
                        "",
                        total=max(job.total, 1),
                        job=job.short_id,
                        state="",
                        losses="",
                    )
                self.progress.update(
                    self.tasks[job.job_id],
                    total=max(job.total, 1),
                    completed=job.done,
                    state=job.state,
                    losses=losses,
                )


def losses_label(losses: dict[str, float]) -> Text:
    """`loss R: E_R 0.025 H_R 0.031 · S: E_S 3.781 H_S 3.790`: the two losses apart (their scales differ),
    each arm named."""
    text = Text()
    by_objective: dict[str, list[tuple[str, float]]] = {}
    for arm in cells_in_order(losses):  # the HIER-style cell's loss ("hier") is no arm of the factorial
        by_objective.setdefault(objective_code(arm), []).append((arm, losses[arm]))
    for code, arms in sorted(by_objective.items(), key=lambda kv: _rank(kv[0])):
        text.append(" · " if text else "loss ", style="dim")
        text.append(f"{code}:", style="dim")
        for arm, value in arms:
            text.append(f" {arm} ", style="dim")
            text.append(f"{value:.3f}")
    return text


def _rank(code: str) -> tuple[int, str]:
    return (OBJECTIVE_CODES.index(code), "") if code in OBJECTIVE_CODES else (len(OBJECTIVE_CODES), code)


def problem_printer(console: Console) -> ProblemCallback:
    """Warns of each skipped events-file line (the orchestrator's `on_problem`)."""

    def warn(job_id: str, problem: ev.LineProblem) -> None:
        console.print(f"[yellow]warning:[/] job {escape(job_id)}: {escape(str(problem))}", highlight=False)

    return warn


PROGRESS_SECONDS = 1.0
"""How often `run` and `resume` redraw their progress from the store."""


def drive(
    store: Store,
    study_ids: list[str],
    *,
    parallel: int | None,
    console: Console,
    gpus: list[str] | None = None,
    orchestrator: Orchestrator | None = None,
) -> int | None:
    """Run the orchestrator until the studies' jobs are done. Ctrl-C or SIGTERM cancels them (resumable);
    then the exit status the command ends with (INTERRUPTED_EXIT or TERMINATED_EXIT, a study and a family
    alike), else None."""
    view = JobProgress(store, console)
    orch = orchestrator or Orchestrator(store, max_parallel=parallel, gpus=gpus)
    orch.on_problem = view.on_problem
    orch.on_events = view.on_events
    interrupted: int | None = None

    def on_stop(signum: int, frame: object) -> None:  # noqa: ARG001
        # Only noted here: the loop cancels the jobs between ticks, never in the middle of one.
        nonlocal interrupted
        if interrupted is None:
            interrupted = INTERRUPTED_EXIT if signum == signal.SIGINT else TERMINATED_EXIT

    previous = {sig: signal.signal(sig, on_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    refreshed = -math.inf
    try:
        with view.progress:
            while True:
                if interrupted is not None:
                    how = "interrupted" if interrupted == INTERRUPTED_EXIT else "terminated (SIGTERM)"
                    console.print(f"[yellow]{how}: cancelling jobs (resume with `hierconsole resume`)[/]")
                    orch.shutdown(cancel=True)
                    break
                try:
                    orch.tick()
                except StoreWriteError as exc:
                    # Nothing more can be saved: stop the workers (they keep their checkpoints and
                    # event logs) and leave at once, rather than wait for commits that never come.
                    stopped = orch.abandon(str(exc), cancel=True)
                    names = ", ".join(job_id.split("/", 1)[-1] for job_id in stopped)
                    console.print(
                        f"[red]stopped {counted(len(stopped), 'running job')}[/]"
                        + (f" ({names}; their checkpoints are kept)" if stopped else ""),
                        highlight=False,
                    )
                    raise
                # The progress is read back from the store (a query over the study's jobs, runs and
                # epochs); once a second is enough to watch, where every 0.2 s tick took CPU from the
                # workers on a machine they fill.
                if time.monotonic() - refreshed >= PROGRESS_SECONDS:
                    view.refresh(study_ids)
                    refreshed = time.monotonic()
                if not orch.busy(study_ids):
                    break
                time.sleep(0.2)
            view.refresh(study_ids)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return interrupted


@contextlib.contextmanager
def saying_backups(home: str | os.PathLike[str] | None, console: Console) -> Iterator[None]:
    """Around a command that writes the store (its store closed inside): once it ends, without an error,
    its last line says so if the store's latest backup could not be taken."""
    yield
    print_backup_note(resolve_home(home, create=False), console)


def print_backup_note(home: Path, console: Console) -> None:
    """Said once, in a command's last lines, while the store's latest backup could not be taken."""
    skipped = read.backup_skipped(home)
    if skipped:
        console.print(
            f"[yellow]warning:[/] the store's latest backup was not taken ({escape(skipped)}); until one is, "
            f"`hierconsole doctor --repair` has no recent copy to rebuild a damaged store from",
            highlight=False,
            soft_wrap=True,
        )


