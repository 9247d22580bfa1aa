"""Overrides of a preset as `--set KEY=VALUE` writes them: parsing one, and every option a user may set
with its value in a preset, what it allows and what it means (the console's override list).
"""

from __future__ import annotations

import tomllib
from dataclasses import MISSING, dataclass, fields
from typing import Any

from hierconsole.config.options import Check, show
from hierconsole.config.preset import Preset


class AssignmentError(ValueError):
    """A `KEY=VALUE` text that is not one; the message says what was expected."""


def parse_assignment(text: str) -> tuple[str, object]:
    """`key=value`: the value is read as a TOML literal (numbers, booleans, lists, quoted strings), and
    as a bare string when it is not one (e.g. temperature.euclidean=tune)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise AssignmentError(f"expected KEY=VALUE (e.g. training.lr=1e-4), got {text!r}")
    return key.strip(), parse_literal(raw)


def parse_literal(raw: str) -> object:
    """`raw` as a TOML literal, or the bare string when it is not one (nested past what the parser
    recurses into, too: the option's check then says what it expects)."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return raw


def split_assignments(text: str) -> list[str]:
    """`a=1 b=[1, 2] c="x y"`: assignments separated by blanks outside brackets and quotes."""
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(depth - 1, 0)
        elif ch.isspace() and depth == 0:
            if current:
                parts.append("".join(current))
                current = []
            continue
        current.append(ch)
    if current:
        parts.append("".join(current))
    return parts


@dataclass(frozen=True)
class OptionInfo:
    key: str
    """Dotted key, as `--set` takes it."""
    value: str
    """Its value in the preset, as TOML would write it."""
    default: str | None
    """The built-in default (None where a preset must give it)."""
    allowed: str
    doc: str


def preset_options(preset: Preset, cls: type = Preset, prefix: str = "") -> list[OptionInfo]:
    """Every option of `preset`, in declaration order, with its value, default, allowed values, meaning."""
    out: list[OptionInfo] = []
    for f in fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        value = getattr(preset, f.name)
        if "section" in f.metadata:
            out.extend(preset_options(value, f.metadata["section"], key))
        elif "check" in f.metadata:
            check: Check = f.metadata["check"]
            default = None if f.default is MISSING else _literal(f.default)
            out.append(OptionInfo(key, _literal(value), default, check.expected, f.metadata.get("doc", "")))
    return out


def _literal(value: Any) -> str:
    if value is None:
        return "(none)"
    return show(list(value) if isinstance(value, tuple) else value)
