"""Summaries of per-seed values: the training seed is the statistical unit, every SD the sample SD (n-1)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample SD (ddof=1) of `values`; the SD is None for one value, whose spread is undefined."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    return mean, sd
