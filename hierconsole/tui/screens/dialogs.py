"""Small modal questions (confirm a step; what to do with running jobs on quit) and the base of the
dialogs with fields."""

from __future__ import annotations

from typing import TypeVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from hierconsole.plurals import counted
from hierconsole.tui.actions import bindings_for

Result = TypeVar("Result")


class FieldDialog(ModalScreen[Result]):
    """A dialog of `.field` rows: the row holding the focus is marked `-focused` (its label shows it)."""

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        for row in self.query(".field"):
            row.set_class(event.widget in row.walk_children(), "-focused")

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        for row in self.query(".field.-focused"):
            if event.widget in row.walk_children():
                row.remove_class("-focused")


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

    def __init__(self, active_jobs: int, on_own_ray: int = 0) -> None:
        super().__init__()
        self.active_jobs = active_jobs
        self.on_own_ray = on_own_ray
        """Of them, those on the Ray instance this console started, which ends when it quits."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                f"{counted(self.active_jobs, 'job')} {'is' if self.active_jobs == 1 else 'are'} queued or running.",
                classes="question",
            )
            yield Static(
                Text.assemble(
                    ("c", "bold"),
                    "  cancel them and quit (resume later with `hierconsole resume`)\n",
                    ("q", "bold"),
                    "  leave them and quit (workers finish on their own; the next console adopts\n"
                    "   them and starts the queued ones)\n",
                    (
                        f"   {self.on_own_ray} of them run on this console's own Ray instance, which ends with\n"
                        "   it: those end too, and `hierconsole resume` continues them\n"
                        if self.on_own_ray
                        else ""
                    ),
                    ("esc", "bold"),
                    " stay",
                )
            )

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)
