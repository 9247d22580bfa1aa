"""How the domain's words look: the style of each job state and study phase, the colour of each arm, the
colour of a sign. Plain dicts of colour names and hex codes, so the terminal (Rich), the loss plots
(plotext) and the figures (matplotlib) all read the same palette without importing each other."""

from __future__ import annotations

import zlib

from hierconsole.factorial import arm_codes
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

OTHER_CELL_COLOURS: tuple[str, ...] = (
    "#332288", "#117733", "#44AA99", "#88CCEE", "#DDCC77", "#CC6677", "#AA4499", "#882255", "#6699CC",
)
"""Colours of the cells beyond the paper's four (Paul Tol's muted palette), one per arm by its name."""


def arm_colour(arm: str) -> str | None:
    """The colour of an arm: the paper's cells and the baselines their own, any other cell one of
    OTHER_CELL_COLOURS picked by its name (the same arm has the same colour in every view and study);
    None for a name that is no arm."""
    if arm in ARM_COLOURS:
        return ARM_COLOURS[arm]
    if arm_codes(arm) is None:
        return None
    return OTHER_CELL_COLOURS[zlib.crc32(arm.encode()) % len(OTHER_CELL_COLOURS)]

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
