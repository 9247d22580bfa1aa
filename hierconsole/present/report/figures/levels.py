"""Level-wise redistribution (paper §5.4): each arm's mAP at every level, leaf first, and H − E per level."""

from __future__ import annotations

from typing import Any

import polars as pl
from matplotlib.figure import Figure

from hierconsole.errors import HierconsoleError
from hierconsole.factorial import arms_in_order, cells_in_order
from hierconsole.present.levels import level_label, levels_from
from hierconsole.present.report.figures.style import ZERO_LINE, arm_colour, drawn_in_style, figure
from hierconsole.study.analysis.report_inputs import StudyInputs
from hierconsole.study.analysis.statistics import t_half_width
from hierconsole.vocabulary import MAP

ROTATE_BEYOND = 6
"""More levels than this turn their tick labels, so the names do not run into each other."""

OFFSET = 0.08
"""Arms side by side at each level, so their error bars do not hide each other."""


@drawn_in_style
def redistribution_figure(inputs: StudyInputs) -> Figure:
    """Left: mAP per level of every arm (cells with their t interval over seeds, baselines as they are);
    right: H_S − E_S and H_R − E_R per level with per-seed points and the t interval."""
    if inputs.redistribution is None or inputs.arms is None:
        raise HierconsoleError(
            f"study {inputs.study_id} has no level-wise redistribution: it needs official-test mAP at every "
            "level and the arms of H_S - E_S or H_R - E_R"
        )
    levels = levels_from(inputs).codes
    fig = figure("double", 2.6, ncols=2)
    left, right = fig.axes
    xs = list(range(len(levels)))
    labels = [level_label(inputs, level) for level in levels]
    ticks: dict[str, Any] = {"rotation": 45, "ha": "right", "rotation_mode": "anchor"} if len(levels) > ROTATE_BEYOND else {}
    arms = inputs.arms
    present = list(arms_in_order(arms["arm"].to_list()))
    cells = set(cells_in_order(present))
    for k, arm in enumerate(present):
        rows = {r["metric"]: r for r in arms.filter(pl.col("arm") == arm).iter_rows(named=True)}
        means = [rows[f"{level}_{MAP}"]["mean"] for level in levels]
        errors = [
            t_half_width(r["sd"], r["n"]) if r["sd"] is not None and r["n"] and r["n"] > 1 else 0.0
            for r in (rows[f"{level}_{MAP}"] for level in levels)
        ]
        shift = (k - (len(present) - 1) / 2) * OFFSET / 2
        left.errorbar(
            [x + shift for x in xs],
            means,
            yerr=errors,
            color=arm_colour(arm),
            marker="o" if arm in cells else "s",
            markersize=3.5,
            linestyle="-" if arm in cells else ":",
            capsize=2,
            label=arm,
        )
    left.set_xticks(xs, labels, **ticks)
    left.set_ylabel("official-test mAP")
    left.set_title("mAP per level (cells: 95 % t interval over seeds)", loc="left")
    left.legend(ncols=2, loc="best")

    result = inputs.redistribution
    for k, (contrast, by_level) in enumerate(result.contrasts.items()):
        shift = (k - (len(result.contrasts) - 1) / 2) * 2 * OFFSET
        colour = arm_colour(result.definition(contrast).split(" - ")[0])
        for x, level in zip(xs, levels, strict=True):
            e = by_level[level]
            right.scatter([x + shift] * e.n, list(e.per_unit.values()), s=10, facecolors="none", edgecolors=colour, linewidths=0.7)
        means = [by_level[level].mean for level in levels]
        t = [by_level[level].evidence.ci95_t for level in levels]
        lower = [m - iv[0] if iv else 0.0 for m, iv in zip(means, t, strict=True)]
        upper = [iv[1] - m if iv else 0.0 for m, iv in zip(means, t, strict=True)]
        flag = "finer down, highest up" if result.pattern[contrast] else "not finer down, highest up"
        right.errorbar(
            [x + shift for x in xs],
            means,
            yerr=[lower, upper],
            color=colour,
            marker="D",
            markersize=3.5,
            capsize=2,
            label=f"{result.definition(contrast)} ({flag}; {result.seeds_with_pattern[contrast]}/{result.n_seeds} seeds)",
        )
    right.axhline(0.0, **ZERO_LINE)
    right.set_xticks(xs, labels, **ticks)
    right.set_ylabel(f"Δ mAP ({result.difference}), paired by seed")
    right.set_title(f"{result.difference} per level, 95 % t interval", loc="left")
    right.legend(loc="best")
    return fig
