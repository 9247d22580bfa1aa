"""How the domain's words look: the style of each job state and study phase, the colour of each arm, the
colour of a sign. Plain dicts of colour names and hex codes, so the terminal (Rich), the loss plots
(plotext) and the figures (matplotlib) all read the same palette without importing each other."""

from __future__ import annotations

from hierconsole.vocabulary import ARMS, BASELINES, ORPHANED, STOPPED, JobState, Phase, StageStatus

STATE_STYLE: dict[str, str] = {
    JobState.FINISHED: "green",
    JobState.RUNNING: "bold cyan",
    JobState.QUEUED: "dim",
    JobState.FAILED: "bold red",
    JobState.CRASHED: "bold red",
    JobState.CANCELLED: "yellow",
    ORPHANED: "bold yellow",
    STOPPED: "yellow",
}

STAGE_STYLE: dict[str, str] = {
    StageStatus.DONE: "green",
    StageStatus.RUNNING: "bold cyan",
    StageStatus.STALE: "yellow",
    StageStatus.PENDING: "dim",
    StageStatus.FAILED: "bold red",
}

PHASE_STYLE: dict[str, str] = {
    Phase.TUNING: "cyan",
    Phase.TRAINING: "cyan",
    Phase.LOCKED: "magenta",
    Phase.EVALUATING: "magenta",
    Phase.COMPLETE: "green",
}

ARM_COLOURS: dict[str, str] = dict(
    zip(
        (*ARMS, *BASELINES),
        # A colour-blind-safe qualitative palette (Okabe-Ito), readable on dark and light terminals:
        # the Euclidean cells blue and sky blue, the Poincaré cells vermillion and orange, the baselines
        # the greys and the purple of the remaining hues.
        ("#0072B2", "#D55E00", "#56B4E9", "#E69F00", "#999999", "#009E73", "#CC79A7"),
        strict=True,
    )
)
"""One colour per arm (cells, then baselines) wherever an arm is drawn: table headers, loss curves, figures."""

ARM_DIGITS = 4
EFFECT_DIGITS = 6
"""Decimals shown by default (terminal, console, Markdown/LaTeX reports): arm values as in the paper's
Table 1, effects and contrasts (often ~1e-3) as in its Tables S7 and S11."""

POSITIVE_STYLE = "green"
NEGATIVE_STYLE = "red"
"""A signed value above / below zero (an effect, a contrast, a bar)."""


def rgb(colour: str) -> tuple[int, int, int]:
    """`#RRGGBB` as an (r, g, b) tuple, the form plotext takes."""
    value = colour.removeprefix("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)
