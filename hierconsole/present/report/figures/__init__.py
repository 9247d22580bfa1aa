"""Publication figures of a study or a family: one function per kind, from the gathered inputs
(`study.analysis.report_inputs`) to a matplotlib Figure, all drawn in one style (`style`).

This package's root imports no matplotlib (an optional extra, `pip install 'hierconsole[plot]'`): the
registry below names the kinds, and `draw` imports the plotting modules when a figure is asked for.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.study.analysis.report_inputs import FamilyInputs, StudyInputs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Target = Literal["study", "family"]


@dataclass(frozen=True)
class FigureKind:
    name: str
    description: str
    module: str
    """Module of this package holding the drawing functions."""
    study: str | None
    """Function drawing it for a study; None where the kind has no study form."""
    family: str | None
    """Function drawing it for a family."""

    def targets(self) -> tuple[Target, ...]:
        found: list[Target] = []
        if self.study:
            found.append("study")
        if self.family:
            found.append("family")
        return tuple(found)


KINDS: dict[str, FigureKind] = {
    k.name: k
    for k in (
        FigureKind(
            "effects",
            "forest plot: per-seed points, mean, 95 % t and bootstrap intervals of each effect "
            "(a family: the members' effects pooled, the member as the unit)",
            "forest",
            "effects_forest",
            "pooled_forest",
        ),
        FigureKind(
            "redistribution",
            "level-wise mAP per arm (every level, leaf first), and H - E per level with its interval",
            "levels",
            "redistribution_figure",
            None,
        ),
        FigureKind("factorial", "the factorial as a grid: hier mAP per cell, geometries × objectives", "grid", "factorial_grid", None),
        FigureKind("contrasts", "a family's declared contrasts per arm pair and level, with intervals", "forest", None, "contrasts_forest"),
        FigureKind("training", "training loss and validation hier score per epoch, per cell and seed", "curves", "training_figure", None),
        FigureKind("recall", "Recall@K against K per level and arm, with the t interval over seeds", "curves", "recall_figure", None),
        FigureKind("temperature", "temperature selection (S6): validation score against tau per geometry", "curves", "temperature_figure", None),
        FigureKind("curvature", "curvature/radius grid (S10): hier mAP of each member's operating point", "curvature", None, "curvature_figure"),
    )
}
"""Every figure kind, in the order `hierconsole plot --help` and the report list them."""

FIGURE_FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
PLOT_EXTRA_HINT = "pip install 'hierconsole[plot]' (matplotlib)"


def check_kind(kind: str, target: Target | None = None) -> FigureKind:
    """The kind named `kind`; a clear error for an unknown one or one without a form for `target`."""
    if kind not in KINDS:
        listing = "\n".join(f"    {k.name.ljust(14)} {k.description}" for k in KINDS.values())
        raise NotFoundError(f"unknown figure kind {kind!r}; kinds:\n{listing}")
    found = KINDS[kind]
    if target is not None and target not in found.targets():
        other = found.targets()[0]
        fits = [k.name for k in KINDS.values() if target in k.targets()]
        raise HierconsoleError(
            f"figure {kind!r} is drawn for a {other}, not a {target}\n  fix: give a {other}, or draw one of "
            f"{', '.join(fits)} for a {target}"
        )
    return found


def check_figure_path(path: str | Path) -> str:
    """The format of a figure file from its suffix (png, pdf or svg)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FIGURE_FORMATS:
        raise HierconsoleError(
            f"cannot tell the figure format of {str(path)!r} from its suffix\n"
            f"  fix: end the file name with .{', .'.join(FIGURE_FORMATS)}"
        )
    return suffix


def require_matplotlib() -> None:
    """Refuse (exit 2, nothing written) when the optional plotting extra is not installed."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        raise HierconsoleError(f"figures need matplotlib, which is not installed\n  fix: {PLOT_EXTRA_HINT}") from None


def draw(kind: str, inputs: StudyInputs | FamilyInputs, **options: object) -> Figure:
    """The figure `kind` of a study's or a family's inputs."""
    target: Target = "family" if isinstance(inputs, FamilyInputs) else "study"
    found = check_kind(kind, target)
    require_matplotlib()
    module = importlib.import_module(f"{__name__}.{found.module}")
    function = getattr(module, found.study if target == "study" else found.family)  # type: ignore[arg-type]
    figure: Figure = function(inputs, **options)
    return figure


__all__ = ["FIGURE_FORMATS", "KINDS", "FigureKind", "check_figure_path", "check_kind", "draw", "require_matplotlib"]
