"""How the domain's words look in a terminal: Rich styles shared by the CLI and the console."""

from __future__ import annotations

from hierconsole.vocabulary import FROZEN, HIER_STYLE, ORPHANED, PCA, JobState, Phase

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

ARM_COLOURS: dict[str, str] = {
    "E_R": "#0072B2",  # blue
    "H_R": "#009E73",  # bluish green
    "E_S": "#D55E00",  # vermillion
    "H_S": "#CC79A7",  # reddish purple
    FROZEN: "#000000",  # black
    PCA: "#E69F00",  # orange
    HIER_STYLE: "#56B4E9",  # sky blue
}
"""One colour per arm, the same in figures, reports and both front ends (Rich takes these hex strings): the
Okabe-Ito palette, distinguishable under the common colour-vision deficiencies. Yellow, its eighth colour,
is left out: it does not read on white paper."""
