"""Live training views: loss curves per cell (textual-plotext) and one-line descriptions of worker events."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from hierconsole.contract import events as ev
from hierconsole.factorial import cells_in_order, objective_code
from hierconsole.levels import PAPER_CODES
from hierconsole.plurals import counted
from hierconsole.registry import OBJECTIVES
from hierconsole.study.read import EventRow
from hierconsole.vocabulary import HIER_SCORE, MAP, REGRESSION, SUPCON, hier_score

_REGRESSION, _SUPCON = OBJECTIVES[REGRESSION].code, OBJECTIVES[SUPCON].code

PLOTS = 2
"""Regression and the contrastive objectives live on different scales, so each gets its own axes."""
CELL_COLORS = {"E_R": "blue", "H_R": "red", "E_S": "cyan", "H_S": "magenta"}
OTHER_COLORS = ("green", "yellow", "orange", "gray", "white")
"""Colours of the cells beyond the paper's four, by their place in the factorial."""


def loss_groups(cells: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The cells on each plot: the regression cells, then every other objective's (the paper's:
    Taxonomy-SupCon's alone)."""
    ordered = cells_in_order(cells)
    regression = tuple(a for a in ordered if objective_code(a) == _REGRESSION)
    others = tuple(a for a in ordered if a not in regression)
    supcon_only = all(objective_code(a) == _SUPCON for a in others)
    return [("regression loss", regression), ("taxonomy SupCon loss" if supcon_only else "other objectives' losses", others)]


def _colour(cell: str, cells: tuple[str, ...]) -> str:
    return CELL_COLORS.get(cell) or OTHER_COLORS[cells.index(cell) % len(OTHER_COLORS)]
KIND_WIDTH = max(len(kind) for kind in ev.EventKind) + 1
"""The kind column fits the longest kind and a space, so no kind runs into its message."""


class LossPlots(Horizontal):
    """One plot per loss, one line per cell; cells not in the job (a tuning job) are left out."""

    def compose(self):
        for i in range(PLOTS):
            yield PlotextPlot(id=f"loss-{i}")

    def show(self, curves: dict[str, list[tuple[int, float]]]) -> None:
        shown = cells_in_order(curves)
        for i, (title, cells) in enumerate(loss_groups(list(curves))):
            plot = self.query_one(f"#loss-{i}", PlotextPlot)
            plt = plot.plt
            plt.clear_data()
            plt.clear_figure()
            plt.title(title)
            plt.xlabel("epoch")
            for cell in cells:
                points = curves.get(cell)
                if points:
                    plt.plot(
                        [e for e, _ in points],
                        [v for _, v in points],
                        label=cell,
                        color=_colour(cell, shown),
                        marker="braille",
                    )
            plot.refresh()


LEVELS_WIDTH = 56
"""The most a log line's mAP list may take (an 80-column log less its time, kind and cell): a deeper
tree's levels beyond it show as the hier score, the top and the leaf."""


def _level_maps(metrics: dict[str, dict[str, float]]) -> str:
    """`mAP leaf 0.512, middle 0.431, high 0.610`: every level, leaf first; a deep tree whose levels do not
    fit `LEVELS_WIDTH` shows the hier score (over the levels above the leaf), its top and its leaf."""
    # Three levels in the paper's order whatever order the event gives them; other depths in the event's
    # order (the worker writes them leaf first).
    order = PAPER_CODES if set(metrics) <= set(PAPER_CODES) else tuple(metrics)
    found = [level for level in order if MAP in metrics.get(level, {})]
    parts = [f"{level} {metrics[level][MAP]:.3f}" for level in found]
    text = ", ".join(parts)
    if len(found) > 3 and len(text) > LEVELS_WIDTH:
        hier = hier_score({level: metrics[level][MAP] for level in found}, hier=found[1:])
        text = f"{HIER_SCORE} {hier:.3f}, {parts[-1]}, {parts[0]} (of {len(found)} levels)"
    return f"{MAP} " + text if parts else ""


def _run(run_id: str) -> str:
    return run_id.split("/", 1)[-1]


def describe(row: EventRow) -> Text:
    """One log line: time since the job's first event, the kind, and what matters in the event."""
    e = row.event
    kind = str(row.kind)
    style = {
        ev.EventKind.FAILED: "bold red",
        ev.EventKind.CANCELLED: "yellow",
        ev.EventKind.DONE: "green",
        ev.EventKind.RESUME: "cyan",
    }.get(row.kind, "")
    if isinstance(e, ev.Start):
        body = f"worker started on {e.device} with {counted(e.threads, 'thread')}"
    elif isinstance(e, ev.Init):
        tau = f" τ={e.tau:g}" if e.tau is not None else ""
        body = f"{e.cell} {e.geometry}/{e.loss}{tau}, {e.trainable_params:,} parameters"
    elif isinstance(e, ev.Epoch):
        body = f"{e.cell} epoch {e.epoch}/{e.epochs} loss {e.train_loss:.4f}"
    elif isinstance(e, ev.Validation):
        body = f"{e.cell} validation at epoch {e.epoch}: {_level_maps(e.metrics)}"
    elif isinstance(e, ev.Checkpoint):
        body = f"checkpoint after epoch {e.epoch}"
    elif isinstance(e, ev.Final):
        body = f"{e.cell} final: {e.updates} updates, reload max diff {e.reload_max_diff:g}"
    elif isinstance(e, ev.TestMetrics):
        body = f"{_run(e.run_id)} Q/G {e.perturbation} ({e.aggregation}): {_level_maps(e.metrics)}"
    elif isinstance(e, ev.Norms):
        body = f"{_run(e.run_id)} max norm {e.max_norm:.4f} < radius {e.radius:.4f}"
    elif isinstance(e, ev.Resume):
        body = f"resumed from the checkpoint after epoch {e.epoch}" if e.epoch else "restarted from epoch 0"
        if e.notes:
            body += " — " + "; ".join(e.notes)
            style = "bold yellow"
    elif isinstance(e, ev.Failed):
        lines = e.error.strip().splitlines()
        body = f"failed: {lines[-1] if lines else 'no traceback'}"
    else:
        body = kind
    text = Text(f"{row.seconds:7.1f}s ", style="dim")
    text.append(f"{kind:<{KIND_WIDTH}}", style=style or "bold")
    text.append(body, style=style)
    return text
