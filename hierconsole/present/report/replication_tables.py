"""The replication's tables on disk: each measured table (`study.read.paper_tables`) as CSV, Markdown and
LaTeX named after the paper's numbering, and an index naming every table written and every one omitted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from hierconsole.present.export import write_table
from hierconsole.study.analysis.paper_tables import PAPER_TABLES

FORMATS = {"csv": "csv", "md": "md", "tex": "latex"}
"""File suffix -> the table writer's format; each table is written in all of them."""
INDEX = "index.md"
SOURCES = (
    f"paper {PAPER_TABLES['S3'].source} (CUB per-seed arm mAP; the factorial effects on hier mAP "
    f"are {PAPER_TABLES['S4'].source})",
    f"paper {PAPER_TABLES['S4'].source} (effects rows: per seed, mean, SD)",
    f"paper {PAPER_TABLES['S11'].source}, i.e. Table S11 (CUB group-macro hier mAP effects, post hoc)",
)
"""Where the paper's values come from, as the index names them."""


def write_tables(
    tables: Sequence[tuple[str, str, pl.DataFrame]], omitted: Mapping[str, str], out: Path, *, comparable: bool
) -> dict[str, Path]:
    """Write every table (id, title, frame) and the index (each through a temporary file, so a killed run leaves none half
    written); returns file name -> path."""
    out.mkdir(parents=True, exist_ok=True)
    names = [f"{table_id}.{suffix}" for table_id, _, _ in tables for suffix in FORMATS]
    for name in [*names, INDEX]:
        # A run killed mid-write leaves its temporary file beside the table; the rerun removes it.
        for leftover in [*out.glob(f".{name}.*.tmp"), out / f"{name}.tmp"]:
            leftover.unlink(missing_ok=True)
    files: dict[str, Path] = {}
    index = [f"# Replication tables\n\nthe paper's values: {'; '.join(SOURCES)}\n"]
    for table_id, title, frame in tables:
        for suffix, fmt in FORMATS.items():
            name = f"{table_id}.{suffix}"
            write_table(frame, out / name, fmt, force=True, precision=6)
            files[name] = out / name
        index.append(f"- {table_id}: {title} ({frame.height} values)")
    for table_id, why in omitted.items():
        index.append(f"- {table_id}: omitted ({why})")
        for suffix in FORMATS:  # written when the replication had that dataset: no longer what index.md says
            (out / f"{table_id}.{suffix}").unlink(missing_ok=True)
    if not comparable:
        index.append("\nSmoke scale: the budgets are cut, so no value is comparable with the paper's.")
    path = out / INDEX
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(index) + "\n", encoding="utf-8")
    tmp.replace(path)
    files[INDEX] = path
    return files
