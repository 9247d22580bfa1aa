"""The curvature/radius grid (S10): each member's operating point (c, r) against its hier mAP."""

from __future__ import annotations

import statistics

from matplotlib.figure import Figure

from hierconsole.errors import HierconsoleError
from hierconsole.factorial import arm_codes
from hierconsole.present import numbers
from hierconsole.present.levels import hier_words
from hierconsole.present.report.figures.style import MUTED, arm_colour, drawn_in_style, figure
from hierconsole.registry import GEOMETRIES
from hierconsole.study.analysis.report_inputs import FamilyInputs, MemberInputs
from hierconsole.study.analysis.statistics import ci95_t
from hierconsole.vocabulary import HIER_METRIC, POINCARE

BALL = GEOMETRIES[POINCARE].code

RADIUS_MARKERS = ("o", "s", "^", "v", "D", "P")


@drawn_in_style
def curvature_figure(inputs: FamilyInputs, metric: str = HIER_METRIC) -> Figure:
    """x: curvature c (log scale), y: the member's Poincaré cell's metric, mean and 95 % t interval over
    seeds, one marker per radius r; a Euclidean member is the dashed line (its band the t interval)."""
    points: list[tuple[MemberInputs, float, float, str, list[float]]] = []
    flat: list[tuple[MemberInputs, str, list[float]]] = []
    for m in inputs.members:
        if m.per_seed is None or metric not in m.per_seed.columns:
            continue
        # A member with a Poincaré cell is an operating point (its Euclidean cells, if any, do not depend on
        # c or r); a member with Euclidean cells only (no operating point) is the flat reference.
        hyperbolic = [a for a in m.arms if (arm_codes(a) or ("", ""))[0] == BALL]
        for arm in hyperbolic or m.arms:
            values = m.per_seed.filter(m.per_seed["arm"] == arm)[metric].to_list()
            if not values:
                continue
            if m.curvature is not None and m.radius is not None and hyperbolic:
                points.append((m, m.curvature, m.radius, arm, values))
            else:
                flat.append((m, arm, values))
    operating = {(c, r) for _, c, r, _, _ in points}
    if len(operating) < 2:
        raise HierconsoleError(
            f"family {inputs.name} has {len(operating)} evaluated Poincaré operating point(s); the grid needs "
            "members that differ in geometry.poincare.c or .r (e.g. nabirds-curvature-control)"
        )
    fig = figure("single", 2.6)
    ax = fig.axes[0]
    radii = sorted({r for _, r in operating})
    for m, c, r, arm, values in points:
        mean = statistics.fmean(values)
        interval = ci95_t(values)
        marker = RADIUS_MARKERS[radii.index(r) % len(RADIUS_MARKERS)]
        err = [[mean - interval[0]], [interval[1] - mean]] if interval else None
        ax.errorbar([c], [mean], yerr=err, marker=marker, color=arm_colour(arm), capsize=2, markersize=4, linestyle="none")
        ax.annotate(m.member, (c, mean), textcoords="offset points", xytext=(4, 3), fontsize=6)
    for m, arm, values in flat:
        mean = statistics.fmean(values)
        ax.axhline(mean, color=arm_colour(arm), linestyle="--", linewidth=0.9, label=f"{m.member} ({arm})")
        interval = ci95_t(values)
        if interval:
            ax.axhspan(*interval, color=arm_colour(arm), alpha=0.12, linewidth=0)
    for k, r in enumerate(radii):
        ax.plot([], [], marker=RADIUS_MARKERS[k % len(RADIUS_MARKERS)], color=MUTED, linestyle="none", label=f"r = {numbers.setting(r)}")
    ax.set_xscale("log")
    ax.set_xlabel("curvature c (log scale)")
    ax.set_ylabel(f"hier mAP (mean of {hier_words(inputs)})" if metric == HIER_METRIC else metric)
    ax.set_title(f"{inputs.name}: operating points, 95 % t interval", loc="left")
    ax.legend(loc="best")
    return fig
