"""A user's per-seed CSV (`effects --from-csv`, `export --from-csv`) read into a per-seed wide table, and
what `effects` and `export` show of it: the same views as of a study in the store."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from hierconsole.csv_input import read_csv_records
from hierconsole.errors import InputError
from hierconsole.study.analysis.effects_view import EffectsView, effects_view
from hierconsole.study.analysis.frames import analysis_frame
from hierconsole.study.analysis.per_seed import KEY_COLUMNS, as_seed, try_arm


def _parse_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def load_effects_csv(path: str | Path, metrics: Sequence[str] | str | None = None) -> pl.DataFrame:
    """Read a user's per-seed CSV: columns ``arm`` (ER/HR/ES/HS or E_R...), ``seed``, metric columns.

    ``metrics`` picks columns (default: every column with numbers in it; columns of text only, such as
    a dataset name, are left out). Every selected cell must be a finite number. Errors name the file,
    the row (line number, header = 1) and the column, and list every problem at once.
    """
    path = Path(path)
    source = str(path)
    if not path.exists():
        raise InputError(source, "file not found", hint="check the path given to --from-csv")
    header, body = read_csv_records(path, "the per-seed CSV", skip_blank=True)
    if header is None:
        raise InputError(source, "the file is empty", hint="expected a header row: arm,seed,<metric>,...")

    header = [h.strip() for h in header]
    problems = []
    dupes = sorted({h for h in header if header.count(h) > 1})
    problems += [f"header: column {h!r} appears more than once" for h in dupes]
    problems += [f"header: column {i + 1} has no name" for i, h in enumerate(header) if not h]
    lower = [h.lower() for h in header]
    for key in KEY_COLUMNS:
        if key not in lower:
            problems.append(f"header: missing column {key!r}")
    if not body:
        problems.append("no data rows after the header")
    if problems:
        raise InputError(source, problems, hint="expected a header row: arm,seed,<metric>,...")

    arm_i, seed_i = lower.index("arm"), lower.index("seed")
    others = [i for i in range(len(header)) if i not in (arm_i, seed_i)]
    for line, row in body:
        if len(row) != len(header):
            problems.append(f"row {line}: {len(row)} fields, the header has {len(header)}")
    if problems:
        raise InputError(source, problems)

    numeric = [
        header[i]
        for i in others
        if any(_parse_float(row[i].strip()) is not None for _, row in body if row[i].strip())
    ]
    if metrics is None:
        chosen = numeric
        if not chosen:
            raise InputError(source, "no numeric metric column besides arm and seed")
    else:
        chosen = list(dict.fromkeys([metrics] if isinstance(metrics, str) else metrics))
        unknown = [m for m in chosen if m not in numeric]
        if unknown:
            raise InputError(
                source,
                [
                    f"--metric {m!r}: {'column holds no numbers' if m in header else 'no such column'}"
                    for m in unknown
                ],
                hint=f"valid metric columns: {', '.join(numeric) or '(none)'}",
            )
    index = {h: i for i, h in enumerate(header)}

    rows = []
    seen: dict[tuple[str, int], int] = {}
    for line, row in body:
        arm_text, seed_text = row[arm_i].strip(), row[seed_i].strip()
        arm, seed = try_arm(arm_text), as_seed(seed_text)
        if arm is None:
            problems.append(
                f"row {line}, column {header[arm_i]!r}: unknown arm {arm_text!r} (valid: ER, HR, ES, HS or E_R, ...)"
            )
        if seed is None:
            problems.append(f"row {line}, column {header[seed_i]!r}: seed {seed_text!r} is not an integer")
        record: dict[str, object] = {"arm": arm, "seed": seed}
        for m in chosen:
            text = row[index[m]].strip()
            value = _parse_float(text) if text else None
            if value is None or not math.isfinite(value):
                problems.append(
                    f"row {line}, column {m!r}: {repr(text) if text else 'empty cell'} is not a finite number"
                )
            record[m] = value
        if arm is not None and seed is not None:
            if (arm, seed) in seen:
                problems.append(f"row {line}: arm {arm}, seed {seed} repeats row {seen[(arm, seed)]}")
            else:
                seen[(arm, seed)] = line
        rows.append(record)
    if problems:
        raise InputError(source, problems)
    return pl.DataFrame(rows, schema={"arm": pl.String, "seed": pl.Int64, **{m: pl.Float64 for m in chosen}})


def csv_effects(path: str | Path, metrics: Sequence[str] | None = None, *, sesoi: float | None = None) -> EffectsView:
    """The effects screen of a per-seed CSV (`effects --from-csv`): arms, simple effects, redistribution
    (with a `sesoi`: every effect's TOST and verdict)."""
    return effects_view(load_effects_csv(path, metrics), source=str(path), metrics=metrics, sesoi=sesoi)


def csv_table_frame(table: str, path: str | Path, metrics: Sequence[str] | None = None) -> pl.DataFrame:
    """An analysis table (`ANALYSIS_TABLES`) computed from a per-seed CSV (`export --from-csv`)."""
    return analysis_frame(table, load_effects_csv(path, metrics), metrics=metrics, source=str(path))
