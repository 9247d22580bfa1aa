"""The factorial as a grid: geometries down, objectives across, each cell's mean hier mAP over seeds with
its SD, shaded by its value, so a G × L study reads at a glance (the effects are the grid's differences)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from hierconsole.errors import HierconsoleError
from hierconsole.factorial import Factorial, arm_of, cells_in_order
from hierconsole.present.report.figures.style import drawn_in_style, figure
from hierconsole.study.analysis.report_inputs import StudyInputs
from hierconsole.vocabulary import HIER_METRIC


@drawn_in_style
def factorial_grid(inputs: StudyInputs, metric: str = HIER_METRIC) -> Figure:
    """Mean ± SD of `metric` per cell, geometries (rows) × objectives (columns); a cell the study does
    not train is left blank."""
    if inputs.arms is None:
        raise HierconsoleError(f"study {inputs.study_id} has no official-test metrics yet (phase {inputs.phase})")
    rows = {r["arm"]: r for r in inputs.arms.filter(inputs.arms["metric"] == metric).iter_rows(named=True)}
    cells = cells_in_order(rows)
    if not cells:
        raise HierconsoleError(f"study {inputs.study_id} has no cell with {metric!r}")
    f = Factorial.spanned(cells)
    means = np.full((len(f.geometries), len(f.objectives)), np.nan)
    for i, g in enumerate(f.geometries):
        for j, o in enumerate(f.objectives):
            r = rows.get(arm_of(g, o))
            if r is not None:
                means[i, j] = r["mean"]
    fig = figure("single", 0.9 + 0.45 * len(f.geometries))
    ax = fig.axes[0]
    ax.imshow(np.ma.masked_invalid(means), cmap="Blues", aspect="auto")
    for i, g in enumerate(f.geometries):
        for j, o in enumerate(f.objectives):
            r = rows.get(arm_of(g, o))
            if r is None:
                continue
            sd = "" if r["sd"] is None else f"\n± {r['sd']:.4f}"
            high = means[i, j] > np.nanmean(means)
            ax.text(j, i, f"{r['mean']:.4f}{sd}", ha="center", va="center", fontsize=6, color="white" if high else "black")
    ax.set_xticks(range(len(f.objectives)), f.objectives)
    ax.set_yticks(range(len(f.geometries)), f.geometries)
    ax.set_xlabel("objective")
    ax.set_ylabel("geometry")
    ax.set_title(f"{inputs.name}: {metric} per cell, mean ± SD over seeds", loc="left")
    return fig
