"""Curves of a study: training loss and validation per epoch, Recall@K against K, temperature selection."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from hierconsole.errors import HierconsoleError
from hierconsole.factorial import arm_codes, arms_in_order
from hierconsole.present.levels import hier_words, level_label, levels_from
from hierconsole.present.report.figures.style import NEUTRAL, arm_colour, drawn_in_style, figure
from hierconsole.study.analysis.report_inputs import StudyInputs
from hierconsole.study.analysis.statistics import t_half_width

PANELS_PER_ROW = 4
"""Recall@K has a panel per level: a deep tree's panels wrap, four to a row, to stay readable."""

SEED_STYLES = ("-", "--", ":", "-.")
"""Seeds of one cell share its colour and differ in line style (cycled past four)."""


def _by_arm(frame: pl.DataFrame) -> list[str]:
    return list(arms_in_order(frame["arm"].to_list()))


@drawn_in_style
def training_figure(inputs: StudyInputs) -> Figure:
    """Training loss per epoch (log scale: regression and SupCon losses differ tenfold) of every final
    cell and seed, and beside it the validation hier score of each validation pass, when there are any."""
    curves = inputs.curves
    if curves.is_empty():
        raise HierconsoleError(f"study {inputs.study_id} has no training epochs stored yet (phase {inputs.phase})")
    validation = inputs.validation
    fig = figure("double" if not validation.is_empty() else "single", 2.4, ncols=2 if not validation.is_empty() else 1)
    seeds = sorted(set(curves["seed"].to_list()))
    panels = [(fig.axes[0], curves, "train_loss")]
    if not validation.is_empty():
        panels.append((fig.axes[1], validation, "score"))
    for ax, frame, column in panels:
        for arm in _by_arm(frame):
            for i, seed in enumerate(seeds):
                part = frame.filter((pl.col("arm") == arm) & (pl.col("seed") == seed)).sort("epoch")
                if part.is_empty():
                    continue
                ax.plot(
                    part["epoch"].to_list(),
                    part[column].to_list(),
                    color=arm_colour(arm),
                    linestyle=SEED_STYLES[i % len(SEED_STYLES)],
                    linewidth=1.0,
                    label=arm if i == 0 else None,
                )
        ax.set_xlabel("epoch")
    fig.axes[0].set_yscale("log")
    fig.axes[0].set_ylabel("training loss (log scale)")
    fig.axes[0].set_title(f"{inputs.name}: training loss, {len(seeds)} seeds (line style)", loc="left")
    fig.axes[0].legend(ncols=2)
    if len(fig.axes) > 1:
        fig.axes[1].set_ylabel("validation hier mAP")
        fig.axes[1].set_title(f"validation (mean of {hier_words(inputs)} mAP)", loc="left")
    return fig


def _recall_ks(arms: pl.DataFrame) -> list[int]:
    return sorted(
        {int(m.partition("_R@")[2]) for m in arms["metric"].to_list() if m.partition("_R@")[2].isdigit()}
    )


@drawn_in_style
def recall_figure(inputs: StudyInputs) -> Figure:
    """Recall@K against K, one panel per level, one line per arm with its 95 % t interval over seeds as a
    band (baselines without a seed have none)."""
    arms = inputs.arms
    ks = _recall_ks(arms) if arms is not None else []
    if arms is None or not ks:
        raise HierconsoleError(f"study {inputs.study_id} has no Recall@K metrics (phase {inputs.phase})")
    levels = levels_from(inputs).codes
    nrows = -(-len(levels) // PANELS_PER_ROW)
    fig = figure("double", 2.3 * nrows, ncols=min(len(levels), PANELS_PER_ROW), nrows=nrows, sharey=True)
    for ax in fig.axes[len(levels) :]:  # the last row's empty places
        fig.delaxes(ax)
    for ax, level in zip(fig.axes, levels, strict=True):
        for arm in _by_arm(arms):
            rows = {r["metric"]: r for r in arms.filter(pl.col("arm") == arm).iter_rows(named=True)}
            found = [(k, rows[f"{level}_R@{k}"]) for k in ks if f"{level}_R@{k}" in rows]
            if not found:
                continue
            kk = [k for k, _ in found]
            means = [r["mean"] for _, r in found]
            ax.plot(kk, means, color=arm_colour(arm), marker="o", markersize=2.5, linestyle="-" if arm_codes(arm) is not None else ":", label=arm)
            halves = [t_half_width(r["sd"], r["n"]) if r["sd"] is not None and (r["n"] or 0) > 1 else None for _, r in found]
            if all(h is not None for h in halves):
                ax.fill_between(
                    kk,
                    [m - h for m, h in zip(means, halves, strict=True)],
                    [m + h for m, h in zip(means, halves, strict=True)],
                    color=arm_colour(arm),
                    alpha=0.18,
                    linewidth=0,
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("K")
        ax.set_title(level_label(inputs, level), loc="left")
    fig.axes[0].set_ylabel("Recall@K (strict)")
    if fig.axes[-1].get_legend_handles_labels()[0]:  # a level with no valid query draws no curve there
        fig.axes[-1].legend(ncols=2, loc="lower right")
    return fig


@drawn_in_style
def temperature_figure(inputs: StudyInputs) -> Figure:
    """Temperature selection (S6): the validation selection score of every candidate tau, per geometry,
    the winner marked."""
    tuning = inputs.tuning.filter(pl.col("score").is_not_null()) if not inputs.tuning.is_empty() else inputs.tuning
    if tuning.is_empty():
        fixed = {k: v for k, v in inputs.preset.get("temperature", {}).items() if isinstance(v, int | float)}
        said = ", ".join(f"temperature.{k} = {v}" for k, v in fixed.items())
        raise HierconsoleError(
            f"study {inputs.study_id} tuned no temperature ({said or 'none tuned yet'}), so there is no selection "
            "to plot\n  fix: plot a study whose preset sets a temperature to \"tune\" (e.g. cub-tune)"
        )
    fig = figure("single", 2.4)
    ax = fig.axes[0]
    colours = {"euclidean": arm_colour("E_S"), "poincare": arm_colour("H_S")}
    for geometry in sorted(set(tuning["geometry"].to_list())):
        part = tuning.filter(pl.col("geometry") == geometry).sort("tau")
        colour = colours.get(geometry, NEUTRAL)
        ax.plot(part["tau"].to_list(), part["score"].to_list(), marker="o", markersize=3, color=colour, label=geometry)
        win = part.filter(pl.col("status") == "winner")
        if not win.is_empty():
            ax.plot(win["tau"].to_list(), win["score"].to_list(), marker="*", markersize=9, color=colour, linestyle="none")
    ax.set_xscale("log")
    ax.set_xlabel("temperature τ (SupCon)")
    ax.set_ylabel(f"validation score (mean of {hier_words(inputs, sep=', ')} mAP)")
    ax.set_title(f"{inputs.name}: temperature selection (★ chosen)", loc="left")
    ax.legend()
    return fig
