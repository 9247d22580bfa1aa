"""Runs: the studies and the live job queue of the current one; cancel, resume, delete, launch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.widget import Widget
from textual.widgets import DataTable, Static

from hierconsole.errors import HierconsoleError
from hierconsole.factorial import cells_in_order
from hierconsole.plurals import counted
from hierconsole.present import numbers as fmt
from hierconsole.study import read
from hierconsole.study.read import JobRow, StudyRow
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.messages import Notice
from hierconsole.tui.orchestration import raise_parallel
from hierconsole.tui.screens.base import ConsoleScreen
from hierconsole.tui.screens.dialogs import ConfirmDialog
from hierconsole.tui.widgets.table_sync import highlighted_key, sync_rows
from hierconsole.vocabulary import ACTIVE_STATES, ARMS, TRAINING_KINDS

if TYPE_CHECKING:
    from hierconsole.study.commands import Orchestrator


JOB_COLUMNS: tuple[tuple[str, str], ...] = (
    ("job", "job"),
    ("state", "state"),
    ("progress", "progress"),
    ("ETA", "eta"),
    ("where", "where"),
)
"""(header, key) of the job table's fixed columns; one column per arm's latest training loss follows, under
the arm's name, as many as fit whole (`fitting_arms`): a narrow terminal loses losses, never progress or ETA."""


def loss_key(arm: str) -> str:
    return f"loss-{arm}"


STUDY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("", "mark"),
    ("study", "study"),
    ("dataset", "dataset"),
    ("phase", "phase"),
    ("jobs", "jobs"),
)


def job_cells(job: JobRow, arms: Sequence[str] = ARMS) -> list:
    progress = fmt.progress_bar(job.done, job.total, 8)
    progress.append(f" {job.done}/{job.total}")
    training = job.kind in TRAINING_KINDS
    return [
        job.short_id,
        fmt.state(job.state),
        progress,
        Text(fmt.duration(job.eta_seconds), justify="right"),
        Text(job.where, style="dim" if job.where == "local" else ""),
        *(fmt.loss(job.losses.get(arm)) if training else Text("") for arm in arms),
    ]


def jobs_arms(jobs: Sequence[JobRow]) -> tuple[str, ...]:
    """The cells the jobs report losses of, in the factorial's order (the paper's four before any has)."""
    return cells_in_order(arm for j in jobs for arm in j.losses) or ARMS


def fitting_arms(jobs: Sequence[JobRow], width: int, padding: int = 1) -> tuple[str, ...]:
    """The arms whose loss columns fit whole in `width` cells beside the fixed columns, in arm order.

    A DataTable wider than its view clips its last column at the edge (a loss of 3.204 read as 3.2): a
    loss column is shown whole or not at all, and the note names the ones left out."""
    arms = jobs_arms(jobs)
    headers = [label for label, _ in JOB_COLUMNS] + list(arms)
    rows = [job_cells(j, arms) for j in jobs]

    def column_width(i: int) -> int:
        cells = [Text(headers[i]).cell_len, *(Text.from_markup(c).cell_len if isinstance(c, str) else c.cell_len for c in (r[i] for r in rows))]
        return max(cells) + 2 * padding

    used = sum(column_width(i) for i in range(len(JOB_COLUMNS)))
    shown: list[str] = []
    for i, arm in enumerate(arms, start=len(JOB_COLUMNS)):
        used += column_width(i)
        if used > width:
            break
        shown.append(arm)
    return tuple(shown)


def cancel_job(job_id: str) -> Callable[[Orchestrator], str]:
    def command(orch: Orchestrator) -> str:
        orch.cancel(job_id)
        return f"cancelling {job_id}"

    return command


def resume_job(job_id: str, study_id: str, *, follow_preset: bool) -> Callable[[Orchestrator], str]:
    """Queue a job again. ``follow_preset``: the console was given no worker limit, so the study's preset
    says how many of its jobs run at once, as it did when the study was launched (a console opened later
    would otherwise run the resumed jobs one at a time)."""

    def command(orch: Orchestrator) -> str:
        requeued = orch.resume([job_id])
        if requeued and follow_preset:
            raise_parallel(orch, read.get_study(orch.store, study_id).preset.compute.max_parallel_jobs)
        return (
            f"queued {job_id} again; it continues from its last checkpoint"
            if requeued
            else (f"{job_id} is not resumable")
        )

    return command


class RunsScreen(ConsoleScreen):
    SCOPE = "runs"
    BINDINGS = bindings_for(SCOPE)
    RELOAD_ON = frozenset({"queue", "study"})
    _arms_shown: tuple[str, ...] = ARMS

    def compose_body(self) -> Iterable[Widget]:
        yield DataTable(id="studies", cursor_type="row")
        yield DataTable(id="jobs", cursor_type="row")
        yield Static(id="job-note")

    def on_mount(self) -> None:
        studies = self.query_one("#studies", DataTable)
        for label, key in STUDY_COLUMNS:
            studies.add_column(label, key=key)
        jobs = self.query_one("#jobs", DataTable)
        self._set_job_columns(jobs, ARMS)
        jobs.focus()

    def _set_job_columns(self, jobs: DataTable, arms: tuple[str, ...]) -> None:
        jobs.clear(columns=True)
        for label, key in JOB_COLUMNS:
            jobs.add_column(label, key=key)
        for arm in arms:
            jobs.add_column(arm, key=loss_key(arm))
        self._arms_shown = arms

    def on_resize(self) -> None:
        self.reload()

    # -- showing the app's state (no store access: the orchestrator loop publishes it) ----------------
    def reload(self) -> None:
        app = self.console_app
        sync_rows(
            self.query_one("#studies", DataTable),
            [
                (
                    s.study_id,
                    [
                        Text("▶", style="bold") if s.study_id == app.study_id else "",
                        s.study_id,
                        s.dataset_id,
                        fmt.phase(s.phase),
                        f"{s.jobs_finished}/{s.jobs}",
                    ],
                )
                for s in app.studies
            ],
        )
        table = self.query_one("#jobs", DataTable)
        shown = [j for j in app.jobs if j.study_id == app.study_id]
        # The vertical scrollbar takes its cells only when the rows overflow the table's height.
        width = table.size.width or 80
        if len(shown) + 1 > table.size.height:
            width -= table.styles.scrollbar_size_vertical
        arms = fitting_arms(shown, width, table.cell_padding)
        if arms != self._arms_shown:
            keep = highlighted_key(table)
            self._set_job_columns(table, arms)
            sync_rows(table, [(j.job_id, job_cells(j, arms)) for j in shown])
            if keep is not None and keep in [j.job_id for j in shown]:
                table.move_cursor(row=[j.job_id for j in shown].index(keep))
        else:
            sync_rows(table, [(j.job_id, job_cells(j, arms)) for j in shown])
        self._show_note()

    def _selected_job(self) -> JobRow | None:
        key = highlighted_key(self.query_one("#jobs", DataTable))
        return next((j for j in self.console_app.jobs if j.job_id == key), None)

    def _show_note(self) -> None:
        job = self._selected_job()
        if job is None:
            text = Text("no jobs in this study" if self.console_app.study_id else "", style="dim")
        elif job.error:
            tail = job.error.strip().splitlines()[-1] if job.error.strip() else ""
            text = Text(f"{job.short_id} {job.state}: {tail}  (r resumes)", style="red")
        elif job.resumable:
            text = Text(f"{job.short_id} {job.state}: r resumes it from its last checkpoint", style="yellow")
        else:
            text = Text(f"{job.short_id}: enter shows loss curves and the event log", style="dim")
        shown = [j for j in self.console_app.jobs if j.study_id == self.console_app.study_id]
        left_out = [arm for arm in jobs_arms(shown) if arm not in self._arms_shown]
        if left_out and job is not None:
            text.append(f"  (losses of {', '.join(left_out)} left out at this width)", style="dim")
        self.query_one("#job-note", Static).update(text)

    @on(DataTable.RowHighlighted, "#jobs")
    def _job_highlighted(self) -> None:
        self._show_note()

    @on(DataTable.RowSelected, "#studies")
    def _study_selected(self, event: DataTable.RowSelected) -> None:
        self.console_app.set_study(event.row_key.value)
        self.query_one("#jobs", DataTable).focus()

    @on(DataTable.RowSelected, "#jobs")
    def _job_selected(self, event: DataTable.RowSelected) -> None:
        job_id = event.row_key.value
        assert job_id is not None  # every job row is added with its job id as key
        from hierconsole.tui.screens.run_detail import RunDetailScreen

        self.app.push_screen(RunDetailScreen(job_id))

    # -- actions --------------------------------------------------------------------------------------
    def action_open(self) -> None:
        if self.focused is self.query_one("#studies", DataTable):
            key = highlighted_key(self.query_one("#studies", DataTable))
            if key:
                self.console_app.set_study(key)
            return
        job = self._selected_job()
        if job is not None:
            from hierconsole.tui.screens.run_detail import RunDetailScreen

            self.app.push_screen(RunDetailScreen(job.job_id))

    def action_launch(self) -> None:
        from hierconsole.tui.screens.launch import LaunchDialog

        self.app.push_screen(LaunchDialog())

    def action_cancel(self) -> None:
        job = self._selected_job()
        if job is None or job.state not in ACTIVE_STATES:
            self.notify("select a queued or running job to cancel", severity="warning")
            return
        self.console_app.submit(cancel_job(job.job_id))

    def action_resume(self) -> None:
        job = self._selected_job()
        if job is None or not job.resumable:
            self.notify("select a crashed, cancelled or failed job to resume", severity="warning")
            return
        self.console_app.submit(
            resume_job(job.job_id, job.study_id, follow_preset=self.console_app.follows_presets)
        )

    def _highlighted_study(self) -> StudyRow | None:
        """The study under the cursor: the highlighted row of the studies table when it has the focus,
        else the study whose jobs are listed (the current one)."""
        app = self.console_app
        studies = self.query_one("#studies", DataTable)
        key = highlighted_key(studies) if self.focused is studies else app.study_id
        return next((s for s in app.studies if s.study_id == key), None)

    def action_delete(self) -> None:
        study = self._highlighted_study()
        if study is None:
            self.notify("no study to delete", title="delete", severity="warning")
            return
        active = sum(j.state in ACTIVE_STATES for j in self.console_app.jobs if j.study_id == study.study_id)
        if active:  # refused before asking: the same rule `delete_study` enforces
            self.notify(
                f"study {study.study_id} has {counted(active, 'queued or running job')}; cancel them first (c)",
                title="delete",
                severity="warning",
            )
            return
        question = (
            f"Delete study {study.study_id} ({study.dataset_id}, {study.phase}) with its {counted(study.jobs, 'job')}, "
            "metrics, audits and artifacts? This cannot be undone."
        )

        def delete_if(yes: bool | None) -> None:
            if yes:
                self.delete_study(study.study_id)

        self.app.push_screen(ConfirmDialog(question), delete_if)

    @work(thread=True, exclusive=True, exit_on_error=False, group="delete")
    def delete_study(self, study_id: str) -> None:
        from hierconsole.study.commands import delete

        try:
            delete(self.console_app.store, study_id)
        except HierconsoleError as exc:  # a job started since the check: said, nothing deleted
            self.app.post_message(Notice(str(exc), severity="warning", title="delete"))
            return
        self.app.post_message(Notice(f"deleted study {study_id}", title="delete"))
