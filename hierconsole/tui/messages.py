"""Messages that worker threads post to the app. They carry plain data; `@on` handlers own state changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # field types only: the console's first frame needs neither the events nor the store
    from hierconsole.contract.events import Event
    from hierconsole.study.read import JobRow, StudyRow


@dataclass
class QueueChanged(Message):
    """The orchestrator's view of the store after a tick: every study and job, and failed audit counts."""

    studies: list[StudyRow]
    jobs: list[JobRow]
    failed_audits: dict[str, int] = field(default_factory=dict)

    def can_replace(self, message: Message) -> bool:
        # Only the newest picture matters; a slow UI must not replay stale ones.
        return isinstance(message, QueueChanged)


@dataclass
class JobEvents(Message):
    """Events a worker wrote, already stored: progress, validation, final states, test metrics."""

    job_id: str
    study_id: str
    events: list[Event]

    @property
    def kinds(self) -> set[str]:
        return {str(e.KIND) for e in self.events}


@dataclass
class StudyLaunched(Message):
    study_id: str
    parallel: int
    executor: str = "local"
    ray_address: str | None = None
    """With the ray executor: the cluster its jobs run on (`local`: an instance of this console)."""


@dataclass
class OrchestratorFailed(Message):
    """An orchestrator step raised; the loop keeps going, the user is told."""

    error: str


@dataclass
class OrchestratorStopped(Message):
    cancelled_jobs: bool


@dataclass
class Notice(Message):
    """A one-line outcome of a command (cancel, resume, delete) to show as a toast."""

    text: str
    severity: str = "information"
    title: str = ""
    """What the outcome is of ("delete", "launch"): the toast's title."""
