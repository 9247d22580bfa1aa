"""Typed option checks for TOML configuration: each check validates one value and says what it expects.

A check raises `Invalid` with the expectation; the caller adds the file and the dotted key, so the user
sees every problem of a file in one pass.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, field
from typing import Any

from hierconsole.names import NAME_RULE, name_problem


class Invalid(Exception):
    """A value that fails its check; the message says what was expected."""


def toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    if value is None:
        return "null"
    return type(value).__name__


def fmt_number(x: float) -> str:
    return repr(x) if isinstance(x, float) else str(x)


class Check:
    """A validator: `expected` describes the allowed values; calling returns the canonical value."""

    expected: str

    def __call__(self, value: Any) -> Any:
        raise NotImplementedError

    def dump(self, value: Any) -> Any:
        """The canonical value as plain JSON types (what the preset's hashed document holds); reading it
        back through the check gives the same value."""
        return list(value) if isinstance(value, tuple) else value


MAX_INTEGER = 2**31 - 1
"""The largest integer any option may take: the store keeps epochs, counts and sizes in 32-bit INTEGER
columns, so a larger one would pass a dry run and fail as the study is recorded."""


class Number(Check):
    def __init__(self, *, integer: bool = False, gt=None, ge=None, lt=None, le=None):
        self.integer, self.gt, self.ge, self.lt, self.le = integer, gt, ge, lt, le
        kind = "an integer" if integer else "a number"
        low = f"({fmt_number(gt)}" if gt is not None else (f"[{fmt_number(ge)}" if ge is not None else None)
        high = f"{fmt_number(lt)})" if lt is not None else (f"{fmt_number(le)}]" if le is not None else None)
        if low and high:
            self.expected = f"{kind} in {low}, {high}"
        elif low:
            self.expected = f"{kind} {'>' if gt is not None else '>='} {low[1:]}"
        elif high:
            self.expected = f"{kind} {'<' if lt is not None else '<='} {high[:-1]}"
        else:
            self.expected = kind

    def __call__(self, value: Any) -> int | float:
        # bool is an int subclass in Python; `true` for a number is a typo, never intended.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"expected {self.expected}")
        if self.integer and not isinstance(value, int):
            raise Invalid(f"expected {self.expected} (write it without a decimal point)")
        if isinstance(value, int) and not self.integer and abs(value) > sys.float_info.max:
            raise Invalid(f"expected {self.expected} (finite)")  # a whole number no float holds
        if not math.isfinite(value):
            raise Invalid(f"expected {self.expected} (finite)")
        if (
            (self.gt is not None and not value > self.gt)
            or (self.ge is not None and not value >= self.ge)
            or (self.lt is not None and not value < self.lt)
            or (self.le is not None and not value <= self.le)
        ):
            raise Invalid(f"out of range: expected {self.expected}")
        if self.integer and value > MAX_INTEGER:
            raise Invalid(f"out of range: at most {MAX_INTEGER:,} (the store keeps it as a 32-bit integer)")
        # Floats are canonicalised so that `lr = 1` and `lr = 1.0` give the same preset hash.
        return int(value) if self.integer else float(value)


class Choice(Check):
    def __init__(self, *allowed: str):
        self.allowed = allowed
        self.expected = "one of " + ", ".join(repr(a) for a in allowed)

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str):
            raise Invalid(f"expected a string, {self.expected}")
        if value not in self.allowed:
            close = difflib.get_close_matches(value, self.allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise Invalid(f"not allowed: expected {self.expected}{hint}")
        return value


class Text(Check):
    expected = "a non-empty string"

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise Invalid(f"expected {self.expected}")
        return value


class Name(Check):
    """A name that becomes an id and a folder name (`hierconsole.names`: one rule for every name)."""

    expected = NAME_RULE

    def __call__(self, value: Any) -> str:
        problem = name_problem(value)
        if problem is not None:
            raise Invalid(problem)
        return value


class FreeText(Check):
    expected = "a string"

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str):
            raise Invalid(f"expected {self.expected}")
        return value


class Bool(Check):
    expected = "true or false"

    def __call__(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise Invalid(f"expected {self.expected}")
        return value


class ListOf(Check):
    def __init__(
        self,
        item: Check,
        *,
        length: int | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        unique: bool = False,
        increasing: bool = False,
        sort: bool = False,
        what: str = "",
    ):
        self.item, self.length, self.unique, self.increasing, self.sort = (
            item,
            length,
            unique,
            increasing,
            sort,
        )
        # A length range (training.level_weights: one weight per level, 2 to 12 levels); `length` is exact.
        self.min_length, self.max_length = (length, length) if length is not None else (min_length, max_length)
        if length is not None:
            size = f"{length} "
        elif min_length is not None and max_length is not None:
            size = f"{min_length} to {max_length} "
        elif min_length is not None:
            size = f"at least {min_length} "
        elif max_length is not None:
            size = f"1 to {max_length} "
        else:
            size = "a non-empty array of "
        extra = []
        if unique:
            extra.append("no repeats")
        if increasing:
            extra.append("strictly increasing")
        tail = f" ({', '.join(extra)})" if extra else ""
        ranged = length is not None or min_length is not None or max_length is not None
        body = f"{size}{'values' if ranged else 'items'}, each {item.expected}{tail}"
        self.expected = f"{what}: {body}" if what else body

    def __call__(self, value: Any) -> tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise Invalid(f"expected {self.expected}")
        if (self.min_length is not None and len(value) < self.min_length) or (
            self.max_length is not None and len(value) > self.max_length
        ):
            raise Invalid(f"has {len(value)} items: expected {self.expected}")
        if not value:
            raise Invalid(f"is empty: expected {self.expected}")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(self.item(v))
            except Invalid as exc:
                raise Invalid(f"item {i} = {show(v)} ({toml_type(v)}): {exc}") from None
        if self.unique and len(set(out)) != len(out):
            dup = sorted({v for v in out if out.count(v) > 1})
            raise Invalid(f"repeats {', '.join(fmt_number(d) for d in dup)}: expected {self.expected}")
        if self.increasing and any(b <= a for a, b in itertools.pairwise(out)):
            raise Invalid(f"not strictly increasing: expected {self.expected}")
        return tuple(sorted(out)) if self.sort else tuple(out)


class Optional(Check):
    """Absent in TOML (which has no null) or None from JSON; otherwise the inner check."""

    def __init__(self, inner: Check):
        self.inner = inner
        self.expected = inner.expected

    def __call__(self, value: Any) -> Any:
        return None if value is None else self.inner(value)


def show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (list, tuple, Mapping, str, bool)) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def option(check: Check, default: Any = MISSING, doc: str = "", *, omit_none: bool = False) -> Any:
    """A preset option: its check, its default (MISSING = required) and a one-line meaning.

    `omit_none`: while None the option is left out of the preset's document, so its hash (a study's
    `preset_sha256`) stays what it was before the option existed. Every option added after studies were
    recorded defaults to None with this set."""
    return field(default=default, metadata={"check": check, "doc": doc, "omit_none": omit_none})


def section(cls: type) -> Any:
    return field(metadata={"section": cls})
