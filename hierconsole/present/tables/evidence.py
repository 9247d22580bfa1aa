"""The summary columns every paired table shares (effects, contrasts, pooled effects, outer-split gains):
mean ± SD, the positive units, the intervals and the tests."""

from __future__ import annotations

from hierconsole.present import numbers
from hierconsole.present.grid import Cell, Column
from hierconsole.study.analysis.paired import PairedSummary

INTERVALS = "95% intervals"
TESTS = "tests"
"""The column groups of the intervals and of the tests: a narrow form moves each to a table of its own."""

EVIDENCE_COLUMNS = [
    Column("95% CI (t)", group=INTERVALS),
    Column("95% CI (bootstrap)", group=INTERVALS),
    Column("p (sign-flip)", group=TESTS),
    Column("seeds to resolve", group=TESTS),
]


def summary_columns(unit: str) -> list[Column]:
    """mean ± SD, `>0 <unit>s` and the :data:`EVIDENCE_COLUMNS`."""
    return [Column("mean ± SD"), Column(f">0 {unit}s"), *EVIDENCE_COLUMNS]


def summary_cells(s: PairedSummary, digits: int) -> list[Cell]:
    """The cells of :func:`summary_columns`: a signed mean ± SD, positive/n, intervals and tests."""
    e = s.evidence
    return [
        numbers.mean_sd(s.mean, s.sd, digits, sign=True),
        numbers.count(s.positive, s.n),
        numbers.interval(e.ci95_t, digits),
        numbers.interval(e.ci95_boot, digits),
        numbers.p_value(e.p_signflip),
        numbers.seeds_needed(e.seeds_to_resolve),
    ]
