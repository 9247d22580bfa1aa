"""How the domain's words look in a terminal: Rich styles shared by the CLI and the console."""

from __future__ import annotations

from hierconsole.vocabulary import ORPHANED, JobState, Phase

STATE_STYLE: dict[str, str] = {
    JobState.FINISHED: "green",
    JobState.RUNNING: "bold cyan",
    JobState.QUEUED: "dim",
    JobState.FAILED: "bold red",
    JobState.CRASHED: "bold red",
    JobState.CANCELLED: "yellow",
    ORPHANED: "bold yellow",
}

PHASE_STYLE: dict[str, str] = {
    Phase.TUNING: "cyan",
    Phase.TRAINING: "cyan",
    Phase.LOCKED: "magenta",
    Phase.EVALUATING: "magenta",
    Phase.COMPLETE: "green",
}
