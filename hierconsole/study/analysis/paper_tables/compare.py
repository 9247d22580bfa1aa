"""A measured table beside the paper's: one row per published number, with the measured value, its seed
SD and the difference, in the paper's row order."""

from __future__ import annotations

import polars as pl

from hierconsole.errors import InputError
from hierconsole.study.analysis.paper_tables.model import PaperTable

BESIDE_COLUMNS: tuple[str, ...] = (
    "published",
    "published_sd",
    "measured",
    "seed_sd",
    "difference",
    "comparable",
)
"""What `beside_paper` adds after a table's keys and ``column``."""


def beside_paper(
    table: PaperTable, measured: pl.DataFrame, *, comparable: bool, complete: bool = True
) -> pl.DataFrame:
    """``measured`` (the table's key columns, ``column``, ``value`` and optionally ``sd``: the shape of
    `PaperTable.long`) beside the published numbers: keys, column, published, published_sd, measured,
    seed_sd, difference (measured - published; null for text cells), comparable (False at smoke scale,
    where budgets differ and the difference says nothing).

    With ``complete`` a published number without a measured one is an error naming the first few; without
    it such a row keeps a null measured value (a table produced in part). A measured row the paper has no
    number for is left out."""
    join = [*table.keys, "column"]
    missing_columns = [c for c in (*join, "value") if c not in measured.columns]
    if missing_columns:
        raise InputError(f"measured {table.id}", f"no column {', '.join(missing_columns)}")
    if measured.select(join).is_duplicated().any():
        raise InputError(f"measured {table.id}", "two rows share their keys")
    published = table.long().rename({"value": "published", "sd": "published_sd"})
    mine = measured.select(
        *join,
        pl.col("value").alias("measured"),
        (pl.col("sd") if "sd" in measured.columns else pl.lit(None, dtype=pl.Float64)).alias("seed_sd"),
    )
    mine = mine.with_columns(*(pl.col(k).cast(published.schema[k]) for k in join))
    out = published.join(mine, on=join, how="left", nulls_equal=True, maintain_order="left")
    if complete:
        absent = out.filter(pl.col("measured").is_null()).select(join).head(3).rows()
        if absent:
            raise InputError(f"measured {table.id}", f"no value for the paper's {absent} (and maybe more)")
    numeric = out.schema["published"].is_numeric()
    difference = (
        pl.col("measured").cast(pl.Float64) - pl.col("published")
        if numeric
        else pl.lit(None, dtype=pl.Float64)
    )
    return out.with_columns(difference.alias("difference"), pl.lit(comparable).alias("comparable")).select(
        *join, *BESIDE_COLUMNS
    )
