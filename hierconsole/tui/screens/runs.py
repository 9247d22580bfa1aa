"""Runs: the studies and the live job queue of the current one; cancel, resume, delete, launch."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.text import Text
from textual import on, work
from textual.widget import Widget
from textual.widgets import DataTable, Static

from hierconsole.study.lifecycle import delete_study
from hierconsole.study.orchestrator import Orchestrator
from hierconsole.study.read import JobRow
from hierconsole.tui import format as fmt
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.messages import Notice
from hierconsole.tui.screens.base import ConsoleScreen
from hierconsole.tui.screens.dialogs import ConfirmDialog
from hierconsole.tui.screens.launch import LaunchDialog
from hierconsole.tui.screens.run_detail import RunDetailScreen
from hierconsole.tui.widgets.table_sync import highlighted_key, sync_rows
from hierconsole.vocabulary import ACTIVE_STATES, ARMS, TRAINING_KINDS


def losses_text(job: JobRow) -> Text:
    text = Text()
    for i, arm in enumerate(ARMS):
        value = job.losses.get(arm)
        cell = "  -  " if value is None else f"{value:5.3f}" if value < 10 else f"{value:5.1f}"
        text.append(("" if i == 0 else " ") + cell, style="" if value is not None else "dim")
    return text


def job_cells(job: JobRow) -> list:
    progress = fmt.progress_bar(job.done, job.total, 8)
    progress.append(f" {job.done}/{job.total}")
    return [
        job.short_id,
        fmt.state(job.state),
        progress,
        losses_text(job) if job.kind in TRAINING_KINDS else Text(""),
        fmt.duration(job.eta_seconds),
    ]


def cancel_job(job_id: str) -> Callable[[Orchestrator], str]:
    def command(orch: Orchestrator) -> str:
        orch.cancel(job_id)
        return f"cancelling {job_id}"

    return command


def resume_job(job_id: str) -> Callable[[Orchestrator], str]:
    def command(orch: Orchestrator) -> str:
        requeued = orch.resume([job_id])
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

    def compose_body(self) -> Iterable[Widget]:
        yield DataTable(id="studies", cursor_type="row")
        yield DataTable(id="jobs", cursor_type="row")
        yield Static(id="job-note")

    def on_mount(self) -> None:
        studies = self.query_one("#studies", DataTable)
        for label, key in (
            ("", "mark"),
            ("study", "study"),
            ("dataset", "dataset"),
            ("phase", "phase"),
            ("jobs", "jobs"),
        ):
            studies.add_column(label, key=key)
        jobs = self.query_one("#jobs", DataTable)
        for label, key in (
            ("job", "job"),
            ("state", "state"),
            ("progress", "progress"),
            ("loss  E_R   H_R   E_S   H_S", "loss"),
            ("ETA", "eta"),
        ):
            jobs.add_column(label, key=key)
        jobs.focus()

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
        sync_rows(
            self.query_one("#jobs", DataTable),
            [(j.job_id, job_cells(j)) for j in app.jobs if j.study_id == app.study_id],
        )
        self._show_note()

    def _selected_job(self) -> JobRow | None:
        key = highlighted_key(self.query_one("#jobs", DataTable))
        return next((j for j in self.console_app.jobs if j.job_id == key), None)

    def _show_note(self) -> None:
        job = self._selected_job()
        note = self.query_one("#job-note", Static)
        if job is None:
            note.update(Text("no jobs in this study" if self.console_app.study_id else "", style="dim"))
        elif job.error:
            tail = job.error.strip().splitlines()[-1] if job.error.strip() else ""
            note.update(Text(f"{job.short_id} {job.state}: {tail}  (r resumes)", style="red"))
        elif job.resumable:
            note.update(
                Text(f"{job.short_id} {job.state}: r resumes it from its last checkpoint", style="yellow")
            )
        else:
            note.update(Text(f"{job.short_id}: enter shows loss curves and the event log", style="dim"))

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
            self.app.push_screen(RunDetailScreen(job.job_id))

    def action_launch(self) -> None:
        self.app.push_screen(LaunchDialog(), self._launch)

    def _launch(self, request) -> None:
        if request is not None:
            self.console_app.launch(request)

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
        self.console_app.submit(resume_job(job.job_id))

    def action_delete(self) -> None:
        study = self.console_app.current_study()
        if study is None:
            self.notify("no study to delete", severity="warning")
            return
        question = (
            f"Delete study {study.study_id} with its {study.jobs} jobs, metrics, audits and "
            "artifacts? This cannot be undone."
        )

        def delete_if(yes: bool | None) -> None:
            if yes:
                self._delete(study.study_id)

        self.app.push_screen(ConfirmDialog(question), delete_if)

    @work(thread=True, exclusive=True, exit_on_error=False, group="delete")
    def _delete(self, study_id: str) -> None:
        delete_study(self.console_app.store, study_id)
        self.app.post_message(Notice(f"deleted study {study_id}"))
