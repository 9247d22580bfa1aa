"""Every data table of the paper, read from the files that ship beside the presets (`paper/`: an index,
tables.toml, and one CSV of rows per table), indexed by the paper's numbering: `main-1`, `main-2`, the main
text's numbers (`abstract`, `sec-5.1` .. `sec-5.5-gains`), the supplement's Tables 1-12 (`S1` .. `S12`) and
the supplement text's numbers (`sec-S1` .. `sec-S12`).

Key and value columns use the project's words (`dataset` cub/nabirds, `aggregation` micro/macro, `arm`
E_R..H_S or a baseline name, `level` leaf/middle/high, metrics `leaf_mAP`..`hier_mAP`, `R@1`..), so a
measured frame of the same shape joins on the keys. A cell printed as "mean ± SD" is a (mean, sd) pair; an
empty cell is None. The replication sets its measured values beside these; tests/study/analysis/test_paper_tables.py
checks the transcription against itself wherever the paper's numbers determine one another.
"""

from __future__ import annotations

import csv
import hashlib
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from hierconsole.locations import resource_dir

Key = str | int | float | None
Scalar = float | int | str | None
Pair = tuple[float, float]
Cell = Key | Pair
Row = tuple[Cell, ...]

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
SD_SIGN = " ± "
"""Between a cell's mean and its SD, as the paper prints them."""


@dataclass(frozen=True)
class PaperTable:
    id: str
    """After the paper's numbering: `main-1`, `sec-5.5`, `S3` (supplement Table 3), `sec-S1` (Sec. S1 text)."""
    title: str
    source: str
    """Where in the paper the rows are printed."""
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    decimals: int
    """The paper's rounding of the values (an SD has the same)."""
    with_sd: bool = False
    """Each value cell is a (mean, sd) pair: the paper prints "mean ± sample SD over training seeds"."""
    note: str = ""
    """What the reader must know to compare with it (approximate values, what the text leaves unsaid)."""

    def __post_init__(self) -> None:
        width = len(self.keys) + len(self.columns)
        for row in self.rows:
            if len(row) != width:
                raise ValueError(f"{self.id}: row {row!r} has {len(row)} cells, expected {width}")
            for cell in row[len(self.keys) :]:
                if self.with_sd and not (cell is None or (isinstance(cell, tuple) and len(cell) == 2)):
                    raise ValueError(f"{self.id}: row {row!r}: {cell!r} is not a (mean, sd) pair")
                if not self.with_sd and isinstance(cell, tuple):
                    raise ValueError(f"{self.id}: row {row!r}: a pair in a table without SDs")
        if len({row[: len(self.keys)] for row in self.rows}) != len(self.rows):
            raise ValueError(f"{self.id}: two rows share their keys")

    def key_of(self, row: Row) -> tuple[Key, ...]:
        return tuple(row[: len(self.keys)])  # type: ignore[arg-type]

    def cells(self, row: Row) -> dict[str, Cell]:
        return dict(zip(self.columns, row[len(self.keys) :], strict=True))

    def long(self) -> pl.DataFrame:
        """One row per printed number: keys, ``column`` (the value column it is printed in), ``value`` and
        ``sd`` (null where the paper prints none); a missing cell has no row."""
        keys: dict[str, list[Scalar]] = {k: [] for k in self.keys}
        column_of: list[str] = []
        value: list[Scalar] = []
        sd: list[float | None] = []
        for row in self.rows:
            for column, cell in self.cells(row).items():
                if cell is None:
                    continue
                for k, v in zip(self.keys, self.key_of(row), strict=True):
                    keys[k].append(v)
                column_of.append(column)
                if isinstance(cell, tuple):
                    value.append(cell[0])
                    sd.append(cell[1])
                else:
                    value.append(cell)
                    sd.append(None)
        series = [pl.Series(k, v, dtype=_dtype(v)) for k, v in keys.items()]
        series += [
            pl.Series("column", column_of, dtype=pl.String),
            pl.Series("value", value, dtype=_dtype(value)),
            pl.Series("sd", sd, dtype=pl.Float64),
        ]
        return pl.DataFrame(series)


def _dtype(values: list[Scalar]) -> type[pl.DataType]:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, str) for v in present):
        return pl.String
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pl.Int64
    if any(isinstance(v, str) for v in present):
        raise ValueError(f"a column mixes text and numbers: {present!r}")
    return pl.Float64


def _scalar(text: str) -> Scalar:
    """A CSV cell: empty is None, a whole number an int, a decimal a float, anything else the text itself."""
    if text == "":
        return None
    if _INT.fullmatch(text):
        return int(text)
    return float(text) if _FLOAT.fullmatch(text) else text


def _cell(text: str, *, with_sd: bool, verbatim: bool) -> Cell:
    if verbatim or text == "":
        return text or None
    if with_sd:
        mean, sep, sd = text.partition(SD_SIGN)
        pair = (_scalar(mean), _scalar(sd))
        if not sep or not all(isinstance(v, float) for v in pair):
            raise ValueError(f"{text!r} is not 'mean{SD_SIGN}sd'")
        return pair  # type: ignore[return-value]
    return _scalar(text)


def load_table(index: dict[str, Any], folder: Path) -> PaperTable:
    """One table: its entry of tables.toml and the rows of ``<id>.csv`` in ``folder``."""
    table_id, keys = index["id"], tuple(index["keys"])
    with_sd, verbatim = index.get("with_sd", False), set(index.get("text", ()))
    path = folder / f"{table_id}.csv"
    with path.open(encoding="utf-8", newline="") as f:
        header, *body = list(csv.reader(f))
    if tuple(header[: len(keys)]) != keys:
        raise ValueError(f"{path}: the header {header} does not start with the keys {list(keys)}")
    rows = []
    for line, cells in enumerate(body, start=2):
        try:
            rows.append(
                tuple(
                    _scalar(text) if i < len(keys) else _cell(text, with_sd=with_sd, verbatim=name in verbatim)
                    for i, (name, text) in enumerate(zip(header, cells, strict=True))
                )
            )
        except ValueError as exc:
            raise ValueError(f"{path}, line {line}: {exc}") from None
    return PaperTable(
        id=table_id,
        title=index["title"],
        source=index["source"],
        keys=keys,
        columns=tuple(header[len(keys) :]),
        rows=tuple(rows),
        decimals=index["decimals"],
        with_sd=with_sd,
        note=index.get("note", ""),
    )


def load_tables(folder: Path) -> dict[str, PaperTable]:
    """Table id -> table, in the order of ``folder``'s tables.toml (the paper's)."""
    index = tomllib.loads((folder / "tables.toml").read_text(encoding="utf-8"))
    return {entry["id"]: load_table(entry, folder) for entry in index["table"]}


PAPER_DIR = resource_dir("paper")
"""The shipped transcription: `paper/` in a checkout, `hierconsole/_paper` in a wheel."""

PAPER_TABLES: dict[str, PaperTable] = load_tables(PAPER_DIR)
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


def paper_long(table_id: str) -> pl.DataFrame:
    """The table one published number a row (:meth:`PaperTable.long`)."""
    return PAPER_TABLES[table_id].long()
