"""Every data table of the paper, transcribed once with where it comes from, indexed by the paper's
numbering: `main-1`, `main-2`, the main text's numbers (`abstract`, `sec-5.1` .. `sec-5.5-gains`), the
supplement's Tables 1-12 (`S1` .. `S12`) and the supplement text's numbers (`sec-S1` .. `sec-S12`).

The replication sets its measured values beside these; tests/study/test_paper_tables.py checks the
transcription against itself wherever the paper's numbers determine one another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import polars as pl

from hierconsole.errors import NotFoundError
from hierconsole.study.analysis.paper_tables import main, supplement, supplement_text
from hierconsole.study.analysis.paper_tables.compare import BESIDE_COLUMNS, beside_paper
from hierconsole.study.analysis.paper_tables.model import Cell, Key, Pair, PaperTable, Row

PAPER_TABLES: dict[str, PaperTable] = {
    t.id: t for t in (*main.TABLES, *supplement.TABLES, *supplement_text.TABLES)
}
"""Table id -> table, in the paper's order (main paper, its text, the supplement's tables, its text)."""


def tables_digest(tables: Iterable[PaperTable]) -> str:
    """SHA-256 of the tables' ids, keys, columns, rounding and rows: what a stage that sets measured values
    beside them is keyed by, so a corrected transcription re-runs it (titles and notes do not count)."""
    h = hashlib.sha256()
    for t in tables:
        h.update(repr((t.id, t.keys, t.columns, t.decimals, t.with_sd, t.rows)).encode())
    return h.hexdigest()


PAPER_TABLES_DIGEST = tables_digest(PAPER_TABLES.values())
"""The digest of the whole transcription (:func:`tables_digest`)."""


def get_paper_table(table_id: str) -> PaperTable:
    if table_id not in PAPER_TABLES:
        raise NotFoundError(f"unknown paper table {table_id!r}; valid ids: {', '.join(PAPER_TABLES)}")
    return PAPER_TABLES[table_id]


def paper_table(table_id: str) -> pl.DataFrame:
    """The table as the paper prints it: key columns, then value columns (``<column>_mean`` and
    ``<column>_sd`` where the paper prints mean ± SD)."""
    return get_paper_table(table_id).frame()


def paper_long(table_id: str) -> pl.DataFrame:
    """The table one published number a row: keys, column, value, sd (null where none is printed)."""
    return get_paper_table(table_id).long()


__all__ = [
    "BESIDE_COLUMNS",
    "PAPER_TABLES",
    "PAPER_TABLES_DIGEST",
    "beside_paper",
    "Cell",
    "Key",
    "Pair",
    "PaperTable",
    "Row",
    "get_paper_table",
    "paper_long",
    "paper_table",
    "tables_digest",
]
