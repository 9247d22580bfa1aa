"""How numbers and states look in the console: signs in colour, mean ± SD, seed directions, bars."""

from __future__ import annotations

from rich.text import Text

from hierconsole.styles import PHASE_STYLE, STATE_STYLE


def sign_style(value: float) -> str:
    return "green" if value > 0 else "red" if value < 0 else ""


def signed(value: float, digits: int = 4) -> Text:
    return Text(f"{value:+.{digits}f}", style=sign_style(value))


def mean_sd(mean: float, sd: float | None, digits: int = 4, *, sign: bool = False) -> Text:
    text = signed(mean, digits) if sign else Text(f"{mean:.{digits}f}")
    text.append(" (n=1)" if sd is None else f" ± {sd:.{digits}f}", style="default")
    return text


def seed_count(k: int, n: int) -> Text:
    """How many seeds show a positive effect: all green, none red, a split yellow."""
    style = "green" if k == n else "red" if k == 0 else "yellow"
    return Text(f"{k}/{n}", style=style)


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLE.get(name, ""))


def phase(name: str) -> Text:
    return Text(name, style=PHASE_STYLE.get(name, ""))


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
