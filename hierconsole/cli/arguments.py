"""Argument types the commands share: each refuses a bad value in argparse's one line (exit 2)."""

from __future__ import annotations

import argparse

from hierconsole.config.options import MAX_INTEGER


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_INTEGER:
        raise argparse.ArgumentTypeError(f"expected a positive integer up to {MAX_INTEGER:,}, got {value!r}")
    return n
