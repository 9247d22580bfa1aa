"""Live training views: loss curves per cell (textual-plotext) and one-line descriptions of worker events."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from hierconsole.console_queries import EventRow

LOSS_GROUPS = (("regression loss", ("E_R", "H_R")), ("taxonomy SupCon loss", ("E_S", "H_S")))
"""The two losses live on different scales, so each gets its own axes."""
CELL_COLORS = {"E_R": "blue", "H_R": "red", "E_S": "cyan", "H_S": "magenta"}


class LossPlots(Horizontal):
    """One plot per loss, one line per cell; cells not in the job (a tuning job) are left out."""

    def compose(self):
        for i, _ in enumerate(LOSS_GROUPS):
            yield PlotextPlot(id=f"loss-{i}")

    def show(self, curves: dict[str, list[tuple[int, float]]]) -> None:
        for i, (title, cells) in enumerate(LOSS_GROUPS):
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
                        color=CELL_COLORS[cell],
                        marker="braille",
                    )
            plot.refresh()


def _level_maps(metrics: dict[str, Any]) -> str:
    parts = []
    for level in ("leaf", "middle", "high"):
        value = (metrics.get(level) or {}).get("mAP")
        if value is not None:
            parts.append(f"{level} {value:.3f}")
    return "mAP " + ", ".join(parts) if parts else ""


def describe(event: EventRow) -> Text:
    """One log line: time since the job's first event, the kind, and what matters in the payload."""
    p = event.payload
    kind = event.kind
    style = {"failed": "bold red", "cancelled": "yellow", "done": "green", "resume": "cyan"}.get(kind, "")
    if kind == "start":
        body = f"worker started on {p.get('device')} with {p.get('threads')} thread(s)"
    elif kind == "init":
        tau = f" τ={p['tau']:g}" if p.get("tau") is not None else ""
        body = f"{p.get('cell')} {p.get('geometry')}/{p.get('loss')}{tau}, {p.get('trainable_params'):,} parameters"
    elif kind == "epoch":
        body = f"{p.get('cell')} epoch {p.get('epoch')}/{p.get('epochs')} loss {p.get('train_loss', float('nan')):.4f}"
    elif kind == "val":
        body = f"{p.get('cell')} validation at epoch {p.get('epoch')}: {_level_maps(p.get('metrics') or {})}"
    elif kind == "checkpoint":
        body = f"checkpoint after epoch {p.get('epoch')}"
    elif kind == "final":
        body = f"{p.get('cell')} final: {p.get('updates')} updates, reload max diff {p.get('reload_max_diff', 0):g}"
    elif kind in ("metrics", "reconcile"):
        run = str(p.get("run_id", "")).split("/", 1)[-1]
        body = f"{run} Q/G {p.get('perturbation')} ({p.get('aggregation')}): {_level_maps(p.get('metrics') or {})}"
    elif kind == "norms":
        body = f"{str(p.get('run_id', '')).split('/', 1)[-1]} max norm {p.get('max_norm', 0):.4f} < radius {p.get('radius', 0):.4f}"
    elif kind == "resume":
        body = f"resumed from the checkpoint after epoch {p.get('epoch')}"
    elif kind == "failed":
        lines = str(p.get("error", "")).strip().splitlines()
        body = f"failed: {lines[-1] if lines else 'no traceback'}"
    else:
        body = kind
    text = Text(f"{event.seconds:7.1f}s ", style="dim")
    text.append(f"{kind:<10}", style=style or "bold")
    text.append(body, style=style)
    return text
