"""The paper's published values, transcribed once, with where each comes from.

Tables S7 and S11 (CUB): arm values are per training seed, query-micro, Q/G perturbations averaged within
the seed; the effects are those the paper computes from them (its 6-decimal arm values, so an effect's last
digit can differ from one recomputed here by 1e-6). The replication sets measured values beside these
(`paper_comparison`); the tests check the formulas against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

SOURCES = {
    "CUB_S7": "paper supplement, Table S7 (CUB per-seed arm mAP and the factorial effects on hier mAP)",
    "CUB_S7_EFFECTS": "paper supplement, Table S7 (effects rows: per seed, mean, SD)",
    "CUB_S11": "paper supplement, Table S11 (CUB group-macro hier mAP effects, post hoc)",
}
"""Where each transcribed table comes from."""

SEEDS = (42, 2024, 3407)

PER_SEED_COLUMNS = ["arm", "seed", "leaf_mAP", "middle_mAP", "high_mAP", "hier_mAP"]

# Table S7 (CUB): arm, seed, Class, Genus, Family, mean hierarchy mAP.
CUB_S7 = [
    ("E_R", 42, 0.613884, 0.500621, 0.564324, 0.532472),
    ("E_R", 2024, 0.618459, 0.497207, 0.562511, 0.529859),
    ("E_R", 3407, 0.619024, 0.499484, 0.563990, 0.531737),
    ("H_R", 42, 0.632376, 0.517540, 0.568281, 0.542911),
    ("H_R", 2024, 0.638752, 0.512089, 0.567167, 0.539628),
    ("H_R", 3407, 0.634214, 0.516354, 0.568181, 0.542268),
    ("E_S", 42, 0.514624, 0.550282, 0.611362, 0.580822),
    ("E_S", 2024, 0.517443, 0.545790, 0.612189, 0.578990),
    ("E_S", 3407, 0.511104, 0.547848, 0.612682, 0.580265),
    ("H_S", 42, 0.456725, 0.541272, 0.624918, 0.583095),
    ("H_S", 2024, 0.454890, 0.538037, 0.626124, 0.582080),
    ("H_S", 3407, 0.453435, 0.542295, 0.625512, 0.583904),
]

# Table S7 (effects, hier mAP): effect -> (per-seed values, mean, sd).
CUB_S7_EFFECTS = {
    "geom_R": ((+0.010438, +0.009769, +0.010531), +0.010246, 0.000416),
    "geom_S": ((+0.002273, +0.003090, +0.003638), +0.003001, 0.000687),
    "loss_E": ((+0.048350, +0.049131, +0.048529), +0.048670, 0.000409),
    "loss_H": ((+0.040184, +0.042452, +0.041636), +0.041424, 0.001149),
    "interaction": ((-0.008165, -0.006678, -0.006892), -0.007245, 0.000804),
}

# Table S11 (CUB group-macro hier mAP effects, post hoc).
CUB_S11 = {
    "geom_R": ((+0.008632, +0.008104, +0.009976), +0.008904, 0.000965),
    "geom_S": ((+0.004214, +0.004807, +0.004921), +0.004647, 0.000380),
    "loss_E": ((+0.061003, +0.062655, +0.062948), +0.062202, 0.001048),
    "loss_H": ((+0.056585, +0.059358, +0.057892), +0.057945, 0.001387),
    "interaction": ((-0.004418, -0.003296, -0.005055), -0.004256, 0.000890),
}

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
