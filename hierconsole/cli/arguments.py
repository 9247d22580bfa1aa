"""Argument types the commands share: each refuses a bad value in argparse's one line (exit 2)."""

from __future__ import annotations

import argparse


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n
