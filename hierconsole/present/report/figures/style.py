"""The one style of every figure: column sizes, fonts, the arm palette (`hierconsole.styles`), saving.

Figures are built as `matplotlib.figure.Figure` objects, never through pyplot: no global figure manager,
no GUI backend, safe off the main thread; saving renders with Agg (PNG) or the vector backends.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, ParamSpec, TypeVar

import matplotlib
from matplotlib.figure import Figure

from hierconsole import __version__
from hierconsole.styles import arm_colour as styles_arm_colour

SINGLE_COLUMN = 3.5
"""Inches: one column of a two-column paper (CVPR, NeurIPS and the like are 3.25-3.5)."""
DOUBLE_COLUMN = 7.0
"""Inches: the full text width of such a paper."""
ROW_HEIGHT = 0.36
"""Inches per row of a forest plot."""
DPI = 200

NEUTRAL = "#333333"
"""Intervals and means that belong to no single arm (an effect is a difference of two)."""
MUTED = "#888888"
ZERO_LINE: dict[str, Any] = {"color": "#999999", "linewidth": 0.8, "linestyle": "--", "zorder": 0}

RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",  # shipped with matplotlib: the same glyphs on every machine, no lookup
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "lines.linewidth": 1.2,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
    "svg.hashsalt": "hierconsole",  # SVG ids from a fixed salt: the same figure gives the same file
    "svg.fonttype": "none",  # text stays text in SVG: searchable, and checked by the report test
    "pdf.fonttype": 42,  # TrueType in PDF, as publishers ask
}

Width = Literal["single", "double"]
P = ParamSpec("P")
R = TypeVar("R")


def arm_colour(arm: str) -> str:
    return styles_arm_colour(arm) or NEUTRAL


@contextmanager
def styled() -> Iterator[None]:
    with matplotlib.rc_context(RC):  # type: ignore[arg-type]  # matplotlib types rc keys as literals
        yield


def figure(width: Width = "single", height: float = 2.4, *, ncols: int = 1, nrows: int = 1, **subplots: Any) -> Figure:
    """A new figure of a column's width, in the style, with its grid of axes (``fig.axes``)."""
    with styled():
        fig = Figure(figsize=(SINGLE_COLUMN if width == "single" else DOUBLE_COLUMN, height), layout="constrained")
        fig.subplots(nrows=nrows, ncols=ncols, squeeze=False, **subplots)
    return fig


def drawn_in_style(function: Callable[P, R]) -> Callable[P, R]:
    """Draw inside the style's rc context (ticks, fonts and lines read it as they are made)."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with styled():
            return function(*args, **kwargs)

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


def metadata(fmt: str) -> dict[str, Any]:
    """File metadata without a creation date, so the same figure gives the same bytes."""
    software = f"hierconsole {__version__} (matplotlib {matplotlib.__version__})"
    if fmt == "png":
        return {"Software": software}
    if fmt == "pdf":
        return {"Creator": software, "Producer": None, "CreationDate": None}
    return {"Creator": software, "Date": None}


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """The figure as a file's bytes in `fmt` (png, pdf, svg)."""
    buffer = io.BytesIO()
    with styled():
        fig.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata(fmt))
    return buffer.getvalue()
