"""Small modal questions: confirm a destructive step; what to do with running jobs on quit."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from hierconsole.tui.actions import bindings_for


class ConfirmDialog(ModalScreen[bool]):
    SCOPE = "confirm"
    BINDINGS = bindings_for(SCOPE)

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="question")
            yield Static(
                Text.assemble(("y", "bold"), " yes   ", ("n", "bold"), " / ", ("esc", "bold"), " no")
            )

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class QuitDialog(ModalScreen[str | None]):
    """Cancel the running jobs (resumable later) or leave them running for the next console to adopt."""

    SCOPE = "quit"
    BINDINGS = bindings_for(SCOPE)

    def __init__(self, active_jobs: int) -> None:
        super().__init__()
        self.active_jobs = active_jobs

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                f"{self.active_jobs} job(s) are queued or running.",
                classes="question",
            )
            yield Static(
                Text.assemble(
                    ("c", "bold"),
                    "  cancel them and quit (resume later with `hierconsole resume`)\n",
                    ("q", "bold"),
                    "  leave them and quit (workers finish on their own; the next console adopts\n"
                    "   them and starts the queued ones)\n",
                    ("esc", "bold"),
                    " stay",
                )
            )

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)
