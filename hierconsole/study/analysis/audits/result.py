"""What a check returns, what every family reads of the study, and how evidence names its offenders.

A check is pending (ok = None) until the evidence it needs exists; it never passes on missing data. A
failing check's evidence names the offending cells (as `<job>/<arm>`, e.g. `final-s42/H_S`) and values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hierconsole.config.preset import HierConfig, Preset
from hierconsole.vocabulary import HIER_AUTHORS, HIER_STYLE

SHOWN = 5
"""Offenders named in one evidence line; the rest are counted."""

Row = dict[str, Any]
"""One stored row by column name (a run, an epoch, a job), as the store hands it."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    evidence: str


@dataclass(frozen=True)
class Study:
    """What every family reads of a study: its preset as registered, typed and as stored (its canonical
    JSON, not the shipped file as it reads now)."""

    study_id: str
    preset: Preset
    recorded: dict[str, Any]

    @property
    def authors_hier(self) -> HierConfig | None:
        """The HIER-style settings when the study trains that arm by the authors' recipe, else None."""
        hier = self.preset.baselines.hier
        return hier if HIER_STYLE in self.preset.evaluation.baselines and hier.recipe == HIER_AUTHORS else None


def cell_name(run_id: str) -> str:
    """`<study>/<job>/<arm>` -> `<job>/<arm>`: how evidence names a cell (and a job)."""
    return run_id.split("/", 1)[1]


def listed(items: Iterable[str]) -> str:
    items = list(items)
    shown = "; ".join(items[:SHOWN])
    return shown + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def majority(rows: Iterable[Any], key: Callable[[Any], Any]) -> tuple[Any, list[Any]]:
    """The most common value of `key` among `rows`, and the rows that differ from it (the offenders)."""
    rows = list(rows)
    common = Counter(key(r) for r in rows).most_common(1)[0][0]
    return common, [r for r in rows if key(r) != common]


def evidence(summary: str, offenders: list[str]) -> str:
    """The check's summary, then (when it fails) the offending cells and their values."""
    return f"{summary}; {listed(offenders)}" if offenders else summary


def updates_per_epoch(rows: int, batch_size: int, drop_last: bool) -> int:
    """Optimizer steps over `rows` training rows: floor with drop_last, else ceil."""
    return rows // batch_size if drop_last else -(-rows // batch_size)
