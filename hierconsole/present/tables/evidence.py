"""The interval and test columns every effect-like table shares (effects, contrasts, pooled effects)."""

from __future__ import annotations

from hierconsole.present import numbers
from hierconsole.present.grid import Cell, Column
from hierconsole.study.analysis.statistics import Evidence

INTERVALS = "95% intervals"
TESTS = "tests"
"""The column groups of the intervals and of the tests: a narrow form moves each to a table of its own."""

EVIDENCE_COLUMNS = [
    Column("95% CI (t)", group=INTERVALS),
    Column("95% CI (bootstrap)", group=INTERVALS),
    Column("p (sign-flip)", group=TESTS),
    Column("seeds to resolve", group=TESTS),
]


def evidence_cells(e: Evidence, digits: int) -> list[Cell]:
    return [
        numbers.interval(e.ci95_t, digits),
        numbers.interval(e.ci95_boot, digits),
        numbers.p_value(e.p_signflip),
        numbers.seeds_needed(e.seeds_to_resolve),
    ]
