"""CSV input files (labels, taxonomies, checklists), read with one error style: which file, what is wrong."""

from __future__ import annotations

import csv
from pathlib import Path

from hierconsole.errors import InputError


def read_csv_records(path: Path, what: str) -> tuple[list[str] | None, list[tuple[int, list[str]]]]:
    """(header, [(line number, fields), ...]) of a UTF-8 CSV file (a BOM is allowed); `what` names the
    file in errors ("the labels CSV"). The header is None for an empty file."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            records = [(reader.line_num, rec) for rec in reader]
    except OSError as exc:
        raise InputError(path, f"cannot read {what}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, f"not a UTF-8 CSV file: {exc}") from exc
    return header, records
