"""One transcribed table of the paper: its id after the paper's numbering, where it comes from, its key
columns, its value columns and its rows, exactly as printed (rounding included).

Key and value columns use the project's words (`dataset` cub/nabirds, `aggregation` micro/macro, `arm`
E_R..H_S or a baseline name, `level` leaf/middle/high, metrics `leaf_mAP`..`hier_mAP`, `R@1`..), so a
measured frame of the same shape (arms_frame, recall_frame, effects_frame, a family's contrasts) joins on
the keys. A value cell printed as "mean ± SD" is a (mean, sd) pair; a missing cell is None.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

Key = str | int | float | None
Scalar = float | int | str | None
Pair = tuple[float, float]
Cell = Key | Pair
Row = tuple[Cell, ...]


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

    def value(self, key: tuple[Key, ...], column: str) -> Cell:
        """The cell of the row with these keys: a (mean, sd) pair in a table with SDs."""
        for row in self.rows:
            if self.key_of(row) == key:
                return self.cells(row)[column]
        raise KeyError(f"{self.id}: no row {key!r}")

    def frame(self) -> pl.DataFrame:
        """The table as printed: keys, then each value column, or ``<column>_mean`` and ``<column>_sd``
        for "mean ± SD" cells (the shape of the project's arms and recall frames)."""
        data: dict[str, list[Scalar]] = {k: [r[i] for r in self.rows] for i, k in enumerate(self.keys)}  # type: ignore[misc]
        for j, column in enumerate(self.columns):
            cells = [r[len(self.keys) + j] for r in self.rows]
            if self.with_sd:
                data[f"{column}_mean"] = [None if c is None else c[0] for c in cells]  # type: ignore[index]
                data[f"{column}_sd"] = [None if c is None else c[1] for c in cells]  # type: ignore[index]
            else:
                data[column] = cells  # type: ignore[assignment]
        return pl.DataFrame(
            {name: pl.Series(name, values, dtype=_dtype(values)) for name, values in data.items()}
        )

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

    def long_of(self, wide: pl.DataFrame) -> pl.DataFrame:
        """A frame of this table's printed shape (`frame`: keys, then ``<column>`` or ``<column>_mean``
        and ``<column>_sd``), e.g. a measured arms or recall frame with its keys added, in the long shape
        (`long`) that `beside_paper` takes. Null cells have no row."""
        parts = []
        for column in self.columns:
            mean, sd = (f"{column}_mean", f"{column}_sd") if self.with_sd else (column, None)
            if mean not in wide.columns:
                continue
            parts.append(
                wide.select(
                    *self.keys,
                    pl.lit(column).alias("column"),
                    pl.col(mean).alias("value"),
                    (pl.col(sd) if sd in wide.columns else pl.lit(None, dtype=pl.Float64)).alias("sd"),
                ).filter(pl.col("value").is_not_null())
            )
        if not parts:
            raise ValueError(f"{self.id}: the frame has none of the columns {', '.join(self.columns)}")
        return pl.concat(parts, how="vertical_relaxed")


def _dtype(values: list[Scalar]) -> type[pl.DataType]:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, str) for v in present):
        return pl.String
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pl.Int64
    if any(isinstance(v, str) for v in present):
        raise ValueError(f"a column mixes text and numbers: {present!r}")
    return pl.Float64
