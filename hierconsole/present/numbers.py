"""How a number, a count and a state read, wherever they are shown: signed values in the sign's colour,
mean ± SD, intervals, seed counts, durations and bars. Defined once for the CLI, the console, the exports'
text forms (Markdown, LaTeX) and the report, so no two of them can print the same value two ways: the plain
spellings (`fixed`, `bracket`) are the digits; the Rich ones below add only colour."""

from __future__ import annotations

from rich.text import Text

from hierconsole.styles import (
    ARM_DIGITS,
    EFFECT_DIGITS,
    NEGATIVE_STYLE,
    PHASE_STYLE,
    POSITIVE_STYLE,
    STAGE_STYLE,
    STATE_STYLE,
)

NO_VALUE = "—"
"""A cell with no value (a seed a contrast lacks), never an empty string that reads as a zero."""


def fixed(value: float, digits: int, *, sign: bool = False) -> str:
    """A number at `digits` decimals, its sign always written with `sign` (a difference)."""
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def bracket(lo: float, hi: float, digits: int, *, sign: bool = False) -> str:
    """An interval's bounds as `[lo, hi]`."""
    return f"[{fixed(lo, digits, sign=sign)}, {fixed(hi, digits, sign=sign)}]"


def setting(value: float | None) -> str:
    """An option's value as it was set (0.5, 1e-06), never rounded: a near-flat curvature must not read as
    0; NO_VALUE where the option does not apply (a Euclidean member's curvature)."""
    return NO_VALUE if value is None else f"{value:g}"


def sign_style(value: float) -> str:
    return POSITIVE_STYLE if value > 0 else NEGATIVE_STYLE if value < 0 else ""


def plain(value: float | None, digits: int = ARM_DIGITS) -> Text:
    """An unsigned value (an arm's metric); a missing one as NO_VALUE."""
    return Text(NO_VALUE, style="dim") if value is None else Text(fixed(value, digits))


def signed(value: float | None, digits: int = EFFECT_DIGITS) -> Text:
    """A difference, with its sign always written and coloured."""
    if value is None:
        return Text(NO_VALUE, style="dim")
    return Text(fixed(value, digits, sign=True), style=sign_style(value))


def loss(value: float | None) -> Text:
    """A training loss as the queue shows it: three decimals, one above 10 (a loss is read for its trend)."""
    if value is None:
        return Text(NO_VALUE, style="dim", justify="right")
    return Text(fixed(value, 3 if abs(value) < 10 else 1), justify="right")


def mean_sd(mean: float, sd: float | None, digits: int = ARM_DIGITS, *, sign: bool = False) -> Text:
    """`mean ± sd`; with one value `mean (n=1)`, since a spread of one value is undefined."""
    text = signed(mean, digits) if sign else plain(mean, digits)
    text.append(" (n=1)" if sd is None else f" ± {fixed(sd, digits)}", style="default")
    return text


def interval(bounds: tuple[float, float] | None, digits: int = EFFECT_DIGITS) -> Text:
    """`[lo, hi]`, in green when it excludes zero above, red below, plain when it straddles zero."""
    if bounds is None:
        return Text(NO_VALUE, style="dim")
    lo, hi = bounds
    style = POSITIVE_STYLE if lo > 0 else NEGATIVE_STYLE if hi < 0 else ""
    return Text(bracket(lo, hi, digits, sign=True), style=style)


def p_value(p: float | None) -> Text:
    return Text(NO_VALUE, style="dim") if p is None else Text(f"{p:.4g}")


def count(k: int, n: int) -> Text:
    """How many seeds (members, splits) show a positive value: all green, none red, a split yellow."""
    style = POSITIVE_STYLE if k == n else NEGATIVE_STYLE if k == 0 else "yellow"
    return Text(f"{k}/{n}", style=style)


def whole(n: int) -> str:
    """A count of images or samples, thousands grouped: "19,021"."""
    return f"{n:,}"


def seeds_needed(n: int | None) -> Text:
    """`seeds_to_resolve`: the seeds a t interval would need to exclude zero at this mean and SD."""
    return Text(NO_VALUE, style="dim") if n is None else Text(str(n))


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLE.get(name, ""))


def phase(name: str) -> Text:
    return Text(name, style=PHASE_STYLE.get(name, ""))


def stage(name: str) -> Text:
    """A replication stage's status (done, running, stale, pending, failed)."""
    return Text(name, style=STAGE_STYLE.get(name, ""))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def progress_bar(done: int, total: int, width: int = 10) -> Text:
    filled = 0 if total <= 0 else round(width * min(done, total) / total)
    text = Text("█" * filled, style="cyan")
    text.append("░" * (width - filled), style="dim")
    return text


def zero_bar(value: float, scale: float, half: int = 12) -> Text:
    """A bar growing left (negative) or right (positive) of a zero line, `half` cells each side."""
    cells = 0 if scale <= 0 else min(half, round(abs(value) / scale * half))
    if value != 0 and cells == 0:
        cells = 1  # a nonzero effect never looks like no effect
    style = sign_style(value)
    left = " " * (half - cells) + "█" * cells if value < 0 else " " * half
    right = "█" * cells + " " * (half - cells) if value > 0 else " " * half
    text = Text()
    text.append(left, style=style if value < 0 else "")
    text.append("│", style="dim")
    text.append(right, style=style if value > 0 else "")
    return text
