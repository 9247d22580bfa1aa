"""The CUB views of the paper's tables the effects tests and the replication use: Table 3 (per-seed arm
mAP, query-micro), Table 4 (its effects) and Table 11 (post-hoc group-macro effects), all in Sec. S7 and
S11 of the supplement. The one transcription is `paper_tables` (`PAPER_TABLES["S3"]`, ...); the names
here are views of it in the shapes the tests were written against.

The effects are those the paper computes from its 6-decimal arm values, so an effect's last digit can
differ from one recomputed here by 1e-6. The replication sets measured values beside these
(`paper_comparison`); the tests check the formulas against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from hierconsole.study.analysis.paper_tables import PAPER_TABLES, PaperTable

SOURCES = {
    "CUB_S7": f"paper {PAPER_TABLES['S3'].source} (CUB per-seed arm mAP; the factorial effects on hier mAP "
    f"are {PAPER_TABLES['S4'].source})",
    "CUB_S7_EFFECTS": f"paper {PAPER_TABLES['S4'].source} (effects rows: per seed, mean, SD)",
    "CUB_S11": f"paper {PAPER_TABLES['S11'].source}, i.e. Table S11 (CUB group-macro hier mAP effects, post hoc)",
}
"""Where each view comes from."""

SEEDS = (42, 2024, 3407)

PER_SEED_COLUMNS = ["arm", "seed", "leaf_mAP", "middle_mAP", "high_mAP", "hier_mAP"]


def _per_seed_rows(table: PaperTable) -> list[tuple[str, int, float, float, float, float]]:
    """(arm, seed, leaf, middle, high, hier) of a per-seed arm table (its dataset and aggregation dropped)."""
    return [row[2:] for row in table.rows]  # type: ignore[misc]


def _effects(table: PaperTable) -> dict[str, tuple[tuple[float, ...], float, float]]:
    """effect -> ((per-seed values in SEEDS order), mean, sd) of a per-seed effects table."""
    out: dict[str, tuple[tuple[float, ...], float, float]] = {}
    for row in table.rows:
        cells = table.cells(row)
        out[str(row[3])] = (
            tuple(float(cells[f"seed_{s}"]) for s in SEEDS),  # type: ignore[arg-type]
            float(cells["mean"]),  # type: ignore[arg-type]
            float(cells["sd"]),  # type: ignore[arg-type]
        )
    return out


CUB_S7 = _per_seed_rows(PAPER_TABLES["S3"])
"""Supplement Table 3 (CUB): arm, seed, Class, Genus, Family, mean hierarchy mAP."""

CUB_S7_EFFECTS = _effects(PAPER_TABLES["S4"])
"""Supplement Table 4 (effects, hier mAP): effect -> (per-seed values, mean, sd)."""

CUB_S11 = _effects(PAPER_TABLES["S11"])
"""Supplement Table 11 (CUB group-macro hier mAP effects, post hoc)."""

SHORT_ARM = {"E_R": "ER", "H_R": "HR", "E_S": "ES", "H_S": "HS"}


def cub_s7_table() -> pl.DataFrame:
    """Table S7 as a per-seed wide table."""
    return pl.DataFrame(CUB_S7, schema=PER_SEED_COLUMNS, orient="row")


def cub_s7_csv(*, short_arms: bool = True) -> str:
    """Table S7 as a user's per-seed CSV, with the short arm spellings (ER, HS) a user might bring."""
    lines = [",".join(PER_SEED_COLUMNS)]
    for arm, seed, *values in CUB_S7:
        name = SHORT_ARM[arm] if short_arms else arm
        lines.append(",".join([name, str(seed), *(f"{v:.6f}" for v in values)]))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Compared:
    """One measured value beside the paper's."""

    table: str
    row: str
    measured: float
    seed_sd: float | None
    published: float
    comparable: bool
    """False at smoke scale: the budgets differ, so the difference says nothing about the replication."""

    @property
    def difference(self) -> float:
        return self.measured - self.published


def paper_comparison(
    table: str,
    published: Mapping[str, tuple[tuple[float, ...], float, float]],
    measured: Mapping[str, tuple[float, float | None]],
    *,
    comparable: bool,
) -> list[Compared]:
    """Measured (mean, seed SD) per row beside a published effects table, in the paper's row order.

    A row the paper has and the replication did not measure is an error naming it (a table is either
    produced whole or named as omitted)."""
    missing = [row for row in published if row not in measured]
    if missing:
        raise KeyError(f"{table}: no measured value for {missing}")
    return [
        Compared(table, row, measured[row][0], measured[row][1], published[row][1], comparable)
        for row in published
    ]
