"""Forest plots: one row per effect or contrast with its per-unit values (seeds, or members when pooled),
the mean, and both 95 % intervals (t above, bootstrap below), against a dashed zero line."""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hierconsole.errors import HierconsoleError
from hierconsole.factorial import is_baseline_contrast
from hierconsole.present.levels import hier_words, level_label
from hierconsole.present.report.figures.style import (
    MUTED,
    NEUTRAL,
    ROW_HEIGHT,
    ZERO_LINE,
    arm_colour,
    drawn_in_style,
    figure,
)
from hierconsole.study.analysis.paired import PairedSummary
from hierconsole.study.analysis.report_inputs import FamilyInputs, StudyInputs
from hierconsole.vocabulary import HIER_METRIC, HIER_SCORE

T_OFFSET = 0.17
"""Rows' intervals sit just above (t) and below (bootstrap) the row's line, so both stay readable."""


@dataclass(frozen=True)
class ForestRow:
    label: str
    summary: PairedSummary
    colour: str = NEUTRAL


def draw_forest(ax: Axes, rows: list[ForestRow]) -> None:
    """Draw `rows` top to bottom on `ax`: points per unit, the mean, the t and bootstrap intervals."""
    n = len(rows)
    for i, row in enumerate(rows):
        y = n - 1 - i
        s, evidence = row.summary, row.summary.evidence
        ax.scatter(list(s.per_unit.values()), [y] * s.n, s=12, facecolors="none", edgecolors=row.colour, linewidths=0.8, zorder=3)
        if evidence.ci95_t is not None:
            ax.hlines(y + T_OFFSET, *evidence.ci95_t, colors=row.colour, linewidth=2.0)
        if evidence.ci95_boot is not None:
            ax.hlines(y - T_OFFSET, *evidence.ci95_boot, colors=MUTED, linewidth=1.2)
        ax.plot([s.mean], [y], marker="D", markersize=4, color=row.colour, linestyle="none", zorder=4)
    ax.axvline(0.0, **ZERO_LINE)
    ax.set_yticks(range(n), [r.label for r in reversed(rows)])
    ax.set_ylim(-0.6, n - 0.4)
    ax.figure.legend(
        handles=[
            Line2D([], [], marker="o", markerfacecolor="none", markeredgecolor=NEUTRAL, linestyle="none", label=f"per {rows[0].summary.unit}"),
            Line2D([], [], marker="D", color=NEUTRAL, linestyle="none", markersize=4, label="mean"),
            Line2D([], [], color=NEUTRAL, linewidth=2.0, label="95 % t interval"),
            Line2D([], [], color=MUTED, linewidth=1.2, label="95 % bootstrap"),
        ],
        loc="outside lower center",
        ncols=4,
        handlelength=1.2,
        columnspacing=0.8,
    )


def _metric_label(metric: str, inputs: StudyInputs | FamilyInputs) -> str:
    level, _, measure = metric.partition("_")
    if metric == HIER_METRIC:
        return f"hier mAP (mean of {hier_words(inputs)} mAP)"
    return f"{level_label(inputs, level)} {measure}" if measure else metric


def _effect_colour(definition: str) -> str:
    """An effect in the colour of the arm it adds (H_R for geom_R = H_R - E_R, ...); an interaction,
    whose definition starts with a bracket, in neutral."""
    return NEUTRAL if definition.startswith("(") else arm_colour(definition.split(" - ")[0])


def _height(rows: int) -> float:
    return 1.1 + ROW_HEIGHT * rows


@drawn_in_style
def effects_forest(inputs: StudyInputs, metric: str = HIER_METRIC) -> Figure:
    """The simple effects and the interaction of one metric of a study."""
    if not inputs.effects:
        raise HierconsoleError(f"study {inputs.study_id} has no official-test metrics yet (phase {inputs.phase})")
    if metric not in inputs.effects:
        raise HierconsoleError(
            f"study {inputs.study_id} has no metric {metric!r}\n  fix: use one of {', '.join(inputs.effects)}"
        )
    effects = inputs.effects[metric]
    rows = [
        ForestRow(f"{name}\n{e.definition}", e, _effect_colour(e.definition))
        for name, e in effects.items()
        if not is_baseline_contrast(name)
    ]
    if not rows:
        raise HierconsoleError(f"study {inputs.study_id} trains no pair of cells that makes an effect ({inputs.omitted})")
    fig = figure("single", _height(len(rows)))
    ax = fig.axes[0]
    draw_forest(ax, rows)
    ax.set_xlabel(f"Δ {_metric_label(metric, inputs)}, paired by seed")
    ax.set_title(f"{inputs.name}: effects over {len(inputs.seeds)} seeds", loc="left")
    return fig


@drawn_in_style
def pooled_forest(inputs: FamilyInputs) -> Figure:
    """A family's members' effects pooled with the member as the unit (outer splits)."""
    if isinstance(inputs.pooled, str):
        raise HierconsoleError(inputs.pooled)
    rows = [ForestRow(f"{name}\n{e.definition}", e) for name, e in inputs.pooled.items()]
    if not rows:
        raise HierconsoleError(f"family {inputs.name}: no effect every member can compute")
    fig = figure("single", _height(len(rows)))
    ax = fig.axes[0]
    draw_forest(ax, rows)
    ax.set_xlabel(f"Δ {_metric_label(inputs.metric, inputs)}, member mean over seeds")
    ax.set_title(f"{inputs.name}: effects pooled over {len(inputs.members)} members", loc="left")
    return fig


@drawn_in_style
def contrasts_forest(inputs: FamilyInputs) -> Figure:
    """Every declared contrast of a family that can be computed, per arm pair and level."""
    rows = []
    waiting = []
    for name, result in inputs.contrasts:
        if isinstance(result, str):
            waiting.append(f"{name}: {result}")
            continue
        for r in result.rows:
            level = "hier" if r.level == HIER_SCORE else level_label(inputs, r.level)
            arms = r.arm_a if r.arm_a == r.arm_b else f"{r.arm_a} − {r.arm_b}"
            rows.append(ForestRow(f"{name} · {arms} · {level}", r, arm_colour(r.arm_a)))
    if not rows:
        detail = "; ".join(waiting) or "it declares none"
        raise HierconsoleError(f"family {inputs.name} has no contrast to plot yet ({detail})")
    fig = figure("double", _height(len(rows)) + 0.2 * len(waiting))
    ax = fig.axes[0]
    draw_forest(ax, rows)
    metric = inputs.metric.partition("_")[2] or inputs.metric
    ax.set_xlabel(f"A − B {metric} (levels as labelled; hier = mean of {hier_words(inputs)}), paired by seed")
    ax.set_title(f"{inputs.name}: declared contrasts", loc="left")
    if waiting:
        fig.text(0.01, 0.0, "\n".join(f"not yet: {line}" for line in waiting), fontsize=6, color=MUTED, va="top")
    return fig
