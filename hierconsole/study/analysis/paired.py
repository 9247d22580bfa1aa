"""One paired summary: the value of each statistical unit (a training seed, an outer split, a family
member, a dataset) and everything derived from those values, computed here and nowhere else.

Every effect, contrast, pooled effect, headline comparison, outer-split gain and arm is a
:class:`PairedSummary` with its own labels beside `per_unit`; `unit` names what one value is, and with it
the keys its JSON and frames have always carried (`per_seed`, `positive_seeds`, `n_seeds` for seeds;
`per_split`, ... for splits). A new interval or test lands in `statistics.evidence` and reaches them all.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import polars as pl

from hierconsole.study.analysis.statistics import EVIDENCE_SCHEMA, Adjusted, Evidence, evidence

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

K = TypeVar("K", int, str)
"""A unit's key: a training seed (int), or a split's, member's or dataset's label."""


@dataclass(frozen=True, kw_only=True)
class PairedSummary(Generic[K]):
    """Per-unit values and their summary: mean, sample SD (n-1), positive units, n, intervals and tests.

    The summary is derived on first use and kept (the instance is frozen, so it cannot go stale)."""

    per_unit: dict[K, float]
    """unit -> value, in the units' order (seeds ascending, members and splits as declared)."""
    unit: str = "seed"
    """What one value is ("seed", "split", "member", "dataset", ...): names the keys of :meth:`columns`."""
    sesoi: float | None = None
    """The smallest effect size of interest of its metric: with it, the TOST and a verdict."""
    adjusted: Adjusted | None = None
    """Its sign-flip p adjusted over the multiplicity family it belongs to (None: in none)."""

    @property
    def n(self) -> int:
        return len(self.per_unit)

    @cached_property
    def mean(self) -> float:
        return statistics.fmean(self.per_unit.values())

    @cached_property
    def sd(self) -> float | None:
        """Sample SD (ddof=1); None for one unit, whose spread is undefined."""
        return statistics.stdev(self.per_unit.values()) if self.n > 1 else None

    @cached_property
    def positive(self) -> int:
        """Units whose value is > 0 (zero is not positive)."""
        return sum(v > 0 for v in self.per_unit.values())

    @cached_property
    def evidence(self) -> Evidence:
        """The intervals and tests over the units (`seeds_to_resolve` then counts units)."""
        found = evidence(list(self.per_unit.values()), self.sesoi)
        return found if self.adjusted is None else replace(found, adjusted=self.adjusted)

    def columns(self, *, named: bool = True) -> dict[str, Any]:
        """mean, sd, positive_<unit>s, n_<unit>s, then the evidence columns: a JSON entry's or a frame row's
        summary (`positive`, `n` when not `named`)."""
        positive, n = count_keys(self.unit if named else None)
        return {"mean": self.mean, "sd": self.sd, positive: self.positive, n: self.n, **self.evidence.columns()}

    def to_json(self, *, named: bool = True) -> dict[str, Any]:
        """`per_<unit>` (keys as strings) and :meth:`columns`."""
        per = f"per_{self.unit}" if named else "per_unit"
        return {per: {str(k): v for k, v in self.per_unit.items()}, **self.columns(named=named)}


def count_keys(unit: str | None) -> tuple[str, str]:
    """The names of the positive and total counts of a summary over `unit` (positive_seeds, n_seeds), or
    of one that names no unit (positive, n)."""
    return (f"positive_{unit}s", f"n_{unit}s") if unit is not None else ("positive", "n")


def summary_schema(unit: str | None) -> dict[str, PolarsDataType]:
    """The polars types of :meth:`PairedSummary.columns` (`unit` None: not `named`)."""
    positive, n = count_keys(unit)
    return {"mean": pl.Float64, "sd": pl.Float64, positive: pl.Int64, n: pl.Int64, **EVIDENCE_SCHEMA}
