"""CSV input files (labels, taxonomies, checklists), read with one error style: which file, what is wrong."""

from __future__ import annotations

import csv
from pathlib import Path

from hierconsole.bounded_input import text_lines
from hierconsole.errors import InputError


def read_csv_records(
    path: Path, what: str, *, skip_blank: bool = False
) -> tuple[list[str] | None, list[tuple[int, list[str]]]]:
    """(header, [(line number, fields), ...]) of a UTF-8 CSV file (a BOM is allowed); `what` names the
    file in errors ("the labels CSV"). The header is None for an empty file; `skip_blank` leaves out rows
    whose every field is blank. Lines are read within `bounded_input`'s bounds (a device or a file
    without line ends is refused, not read into memory)."""
    reader = None
    try:
        reader = csv.reader(text_lines(path, what, hint="save it as UTF-8 CSV"))
        header = next(reader, None)
        records = [(reader.line_num, rec) for rec in reader if not skip_blank or any(v.strip() for v in rec)]
    except OSError as exc:
        raise InputError(path, f"cannot read {what}: {exc.strerror or exc}") from exc
    except csv.Error as exc:
        line = f"line {reader.line_num}: " if reader is not None else ""
        if "field larger than field limit" in str(exc):
            raise InputError(
                path,
                f"{line}a field is longer than {csv.field_size_limit():,} characters, the most a CSV field "
                f"may hold here",
                hint=f"is this {what}? a field that long is usually a missing quote or a binary file",
            ) from None
        raise InputError(path, f"{line}not a well-formed CSV: {exc}") from None
    return header, records
