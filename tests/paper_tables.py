"""The paper's tables in the shapes the analysis tests feed the tool, read through the one loader from the
shipped files (hierconsole.study.analysis.paper_tables): no copy of a value lives in the tests."""

from __future__ import annotations

import polars as pl

from hierconsole.study.analysis.paper_tables import PAPER_TABLES, Cell

SEEDS = (42, 2024, 3407)
"""The paper's training seeds, in its tables' order (their per-seed columns are `seed_<seed>`)."""

SHORT_ARM = {"E_R": "ER", "H_R": "HR", "E_S": "ES", "H_S": "HS"}
"""The short arm spellings a user might bring in a per-seed CSV."""


def per_seed_table(table_id: str = "S3") -> pl.DataFrame:
    """A per-seed arm table (S3: CUB query-micro, S5: NABirds group-macro) as the tool's per-seed input:
    arm, seed, then each level's mAP and the hier score (the dataset and aggregation keys dropped)."""
    t = PAPER_TABLES[table_id]
    return pl.DataFrame([row[2:] for row in t.rows], schema=[*t.keys[2:], *t.columns], orient="row")


def per_seed_csv(table_id: str = "S3", *, short_arms: bool = True) -> str:
    """The per-seed table as a user's CSV, with the short arm spellings (ER, HS) by default."""
    frame = per_seed_table(table_id)
    lines = [",".join(frame.columns)]
    for arm, seed, *values in frame.iter_rows():
        lines.append(",".join([SHORT_ARM[arm] if short_arms else arm, str(seed), *(f"{v:.6f}" for v in values)]))
    return "\n".join(lines) + "\n"


def effects(table_id: str) -> dict[str, dict[str, Cell]]:
    """effect -> its cells (`seed_42`.., `mean`, `sd`) in a per-seed effects table (S4, S6, S11)."""
    t = PAPER_TABLES[table_id]
    return {str(t.key_of(row)[3]): t.cells(row) for row in t.rows}
