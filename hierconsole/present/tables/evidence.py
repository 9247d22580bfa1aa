"""The summary columns every paired table shares (effects, contrasts, pooled effects, outer-split gains):
mean ± SD, the positive units, the intervals and the tests; the Holm-adjusted p where a row belongs to a
multiplicity family, and the TOST and its verdict where a SESOI was declared."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text

from hierconsole.present import numbers
from hierconsole.present.grid import Cell, Column
from hierconsole.study.analysis.paired import PairedSummary

INTERVALS = "95% intervals"
TESTS = "tests"
EQUIVALENCE = "equivalence"
"""The column groups of the intervals, of the tests and of the TOST: a narrow form moves each to a table of
its own."""

EVIDENCE_COLUMNS = [
    Column("95% CI (t)", group=INTERVALS),
    Column("95% CI (bootstrap)", group=INTERVALS),
    Column("p (sign-flip)", group=TESTS),
    Column("seeds to resolve", group=TESTS),
]
HOLM_COLUMN = Column("p (Holm)", group=TESTS)
EQUIVALENCE_COLUMNS = [
    Column("SESOI", group=EQUIVALENCE),
    Column("p (TOST)", group=EQUIVALENCE),
    Column("verdict", numeric=False, group=EQUIVALENCE),
]
VERDICT_STYLE = {"equivalent": "green", "different": "yellow", "equivalent and different": "cyan"}


@dataclass(frozen=True)
class Shown:
    """Which optional columns a table's rows fill: the adjusted p, the TOST."""

    adjusted: bool = False
    equivalence: bool = False

    @classmethod
    def of(cls, rows: Iterable[PairedSummary]) -> Shown:
        rows = list(rows)
        return cls(
            adjusted=any(r.adjusted is not None for r in rows),
            equivalence=any(r.sesoi is not None for r in rows),
        )


def summary_columns(unit: str, shown: Shown = Shown()) -> list[Column]:
    """mean ± SD, `>0 <unit>s`, the :data:`EVIDENCE_COLUMNS`, then what `shown` says the rows fill."""
    return [
        Column("mean ± SD"),
        Column(f">0 {unit}s"),
        *EVIDENCE_COLUMNS,
        *([HOLM_COLUMN] if shown.adjusted else []),
        *(EQUIVALENCE_COLUMNS if shown.equivalence else []),
    ]


def summary_cells(s: PairedSummary, digits: int, shown: Shown = Shown()) -> list[Cell]:
    """The cells of :func:`summary_columns`: a signed mean ± SD, positive/n, intervals and tests."""
    e = s.evidence
    cells: list[Cell] = [
        numbers.mean_sd(s.mean, s.sd, digits, sign=True),
        numbers.count(s.positive, s.n),
        numbers.interval(e.ci95_t, digits),
        numbers.interval(e.ci95_boot, digits),
        numbers.p_value(e.p_signflip),
        numbers.seeds_needed(e.seeds_to_resolve),
    ]
    if shown.adjusted:
        cells.append(numbers.p_value(e.adjusted.p_holm if e.adjusted is not None else None))
    if shown.equivalence:
        q = e.equivalence
        cells += [
            Text(f"{q.sesoi:g}") if q is not None else numbers.plain(None),
            numbers.p_value(q.p_tost if q is not None else None),
            Text(q.verdict, style=VERDICT_STYLE.get(q.verdict, ""))
            if q is not None and q.verdict
            else numbers.plain(None),
        ]
    return cells


def evidence_legend(rows: Iterable[PairedSummary]) -> list[Text]:
    """What the optional columns the rows fill mean (the families their adjusted p are over, the TOST), one
    clause a line, so a legend never widens a view beyond its tables."""
    rows = list(rows)
    families = sorted({r.adjusted.family for r in rows if r.adjusted is not None})
    lines = []
    if families:
        lines += [
            f"p (Holm): the sign-flip p adjusted over its family ({'; '.join(families)}),",
            "  family-wise error; Benjamini-Hochberg's (false discovery) is p_bh in --json",
        ]
    if any(r.sesoi is not None for r in rows):
        lines += [
            "p (TOST): paired TOST against ±SESOI (the larger one-sided t p, n-1 df)",
            "verdict at 5 %: different (95 % t interval excludes 0), equivalent (90 % t",
            "  interval inside ±SESOI), equivalent and different, or inconclusive",
        ]
    return [Text(line, style="dim") for line in lines]
