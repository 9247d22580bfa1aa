"""Tables out as CSV, Parquet, JSON, Markdown or LaTeX.

CSV, Parquet and JSON keep full float precision (they are data); Markdown and LaTeX are for reading,
so they round to ``precision``, merge a ``mean``/``sd`` column pair (or ``X_mean``/``X_sd``) into one
"mean ± SD" cell as the paper's tables do, and an interval's ``X_lo``/``X_hi`` pair into one "[lo, hi]". Files are written atomically (temp file in the same folder,
fsync, ``os.replace``) and never overwrite an existing file unless asked to.

The store side is a plain callable ``(table, study_id) -> polars.DataFrame`` (:data:`FramesProvider`),
so this module knows nothing about DuckDB.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from hierconsole.errors import HierconsoleError
from hierconsole.present.numbers import bracket, fixed
from hierconsole.study.analysis.frames import check_table, listing

FORMATS: dict[str, str] = {
    "csv": "comma-separated values, full precision",
    "parquet": "Apache Parquet, full precision and types",
    "json": "a JSON array of row objects, full precision",
    "md": "Markdown pipe table, rounded, mean ± SD cells",
    "latex": "LaTeX booktabs tabular, rounded, mean $\\pm$ SD cells",
}

SUFFIX_FORMATS: dict[str, str] = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".md": "md",
    ".markdown": "md",
    ".tex": "latex",
}

FramesProvider = Callable[[str, str | None], pl.DataFrame]
"""Materialises a table from the store: ``provider(table, study_id) -> DataFrame``."""

MAX_PRECISION = 12


def check_format(fmt: str | None, path: str | Path | None = None) -> str:
    """The format to write: ``fmt`` if given, else inferred from the path's suffix."""
    if fmt is None:
        suffix = Path(path).suffix.lower() if path is not None else ""
        if suffix not in SUFFIX_FORMATS:
            raise HierconsoleError(
                f"cannot tell the format of {str(path)!r} from its suffix\n"
                f"  fix: pass --format, one of: {', '.join(FORMATS)}"
            )
        return SUFFIX_FORMATS[suffix]
    key = fmt.strip().lower()
    if key not in FORMATS:
        raise HierconsoleError(f"unknown format {fmt!r}; valid formats:\n{listing(FORMATS)}")
    return key


STDOUT = "-"
"""`-o -`: write a text format to standard output."""
TEXT_FORMATS = ("csv", "json", "md", "latex")
STDOUT_FORMAT = "csv"
"""What `-o -` prints without --format: full precision, and what a pipe's next tool reads."""


def _check_target(path: Path, force: bool) -> Path:
    """The file to replace: `path`, or with --force the target of the symlink `path`. Refuses folders,
    devices, sockets and pipes whatever --force says (writing there is never an export)."""
    target = path
    if path.is_symlink():
        if not force:
            raise HierconsoleError(
                f"{path} is a symlink (to {os.readlink(path)}); not writing through it\n"
                f"  fix: pass --force to replace the file it points to, or choose another path"
            )
        target = path.resolve()
    if target.is_dir():
        raise HierconsoleError(f"{path} is a folder\n  fix: give a file path with -o")
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        raise HierconsoleError(
            f"{path} is not a regular file (a device, socket or pipe); refusing to replace it\n"
            f"  fix: choose a file path with -o, or -o - for standard output"
        )
    if target.exists() and not force:
        raise HierconsoleError(
            f"{path} already exists; not overwriting it\n  fix: pass --force, or choose another path"
        )
    if not target.parent.is_dir():
        raise HierconsoleError(
            f"folder {target.parent} does not exist\n  fix: create it first, or choose another path"
        )
    return target


def _stdout_format(fmt: str | None) -> str:
    """The format to write to standard output: the one given (there is no suffix), a text one, else csv."""
    if fmt is None:
        return STDOUT_FORMAT
    fmt = check_format(fmt)
    if fmt not in TEXT_FORMATS:
        raise HierconsoleError(
            f"-o - writes to standard output, which takes text formats only ({', '.join(TEXT_FORMATS)}), "
            f"not {fmt}\n  fix: give a file path with -o for {fmt}"
        )
    return fmt


def _umask() -> int:
    """The process umask, read without changing it where /proc allows (os.umask must set to read)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------------------------- rendering


def _mean_sd_pairs(columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """display column -> (mean column, sd column), keyed at the mean column's position."""
    pairs = {}
    present = set(columns)
    for c in columns:
        if c == "mean" and "sd" in present:
            pairs[c] = ("mean", "sd")
        elif c.endswith("_mean") and f"{c[: -len('_mean')]}_sd" in present:
            pairs[c] = (c, f"{c[: -len('_mean')]}_sd")
    return pairs


def _interval_pairs(columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """display column -> (lower, upper) for each ``X_lo``/``X_hi`` pair (the intervals), keyed at X_lo."""
    present = set(columns)
    return {
        c: (c, f"{c[: -len('_lo')]}_hi")
        for c in columns
        if c.endswith("_lo") and f"{c[: -len('_lo')]}_hi" in present
    }


def _cell(value: object, precision: int) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return fixed(value, precision)
    return str(value)


def display_rows(df: pl.DataFrame, precision: int, pm: str) -> tuple[list[str], list[bool], list[list[str]]]:
    """Headers, right-alignment flags and text cells, with mean/sd pairs merged as ``mean{pm}sd`` and
    lo/hi pairs as ``[lo, hi]`` (an empty cell where the interval is undefined, e.g. one seed)."""
    pairs = _mean_sd_pairs(df.columns)
    intervals = _interval_pairs(df.columns)
    hidden = {sd for _, sd in pairs.values()} | {hi for _, hi in intervals.values()}
    headers: list[str] = []
    numeric: list[bool] = []
    getters: list[tuple[str, str, str | None]] = []  # (kind, first column, its partner or None)
    for c in df.columns:
        if c in hidden:
            continue
        if c in pairs:
            headers.append("mean ± SD" if c == "mean" else c[: -len("_mean")])
            numeric.append(True)
            getters.append(("pm", *pairs[c]))
        elif c in intervals:
            headers.append(c[: -len("_lo")])
            numeric.append(True)
            getters.append(("interval", *intervals[c]))
        else:
            headers.append(c)
            numeric.append(df.schema[c].is_numeric())
            getters.append(("plain", c, None))
    rows = []
    for record in df.iter_rows(named=True):
        cells = []
        for kind, first, second in getters:
            if second is None:
                cells.append(_cell(record[first], precision))
                continue
            a, b = record[first], record[second]
            if kind == "interval":
                cells.append("" if a is None or b is None else bracket(float(a), float(b), precision))
            elif a is None:
                cells.append("")
            else:
                # One seed has no sample SD; say so rather than print a misleading 0.
                cells.append(f"{fixed(float(a), precision)}{pm}{'n/a' if b is None else fixed(float(b), precision)}")
        rows.append(cells)
    return headers, numeric, rows


def render_markdown(df: pl.DataFrame, precision: int = 4) -> str:
    """A GitHub-flavoured pipe table; numbers right-aligned, mean ± SD merged."""
    headers, numeric, rows = display_rows(df, precision, " ± ")

    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(esc(h) for h in headers) + " |",
        "|" + "|".join("---:" if n else ":---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "−": r"$-$",
    "\n": " ",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (one pass, so inserted braces are not escaped again)."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


def render_latex(df: pl.DataFrame, precision: int = 4) -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``); mean $\\pm$ SD and [lo, hi] merged."""
    marker = "\x00"  # stands in for ± until the text around it is escaped
    headers, numeric, rows = display_rows(df, precision, marker)

    def esc(text: str) -> str:
        # A row starting with "[" would be read as the optional argument of the previous row's \\.
        return ("{}" if text.startswith("[") else "") + latex_escape(text).replace(marker, r" $\pm$ ")

    spec = "".join("r" if n else "l" for n in numeric)
    lines = [
        "% requires \\usepackage{booktabs}",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(esc(h) for h in headers) + r" \\",
        "\\midrule",
    ]
    lines += [" & ".join(esc(c) for c in row) + r" \\" for row in rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------- writing


def _render_text(df: pl.DataFrame, fmt: str, precision: int) -> str:
    if fmt == "csv":
        return df.write_csv()
    if fmt == "json":
        return df.write_json()
    if fmt == "md":
        return render_markdown(df, precision)
    return render_latex(df, precision)


def _write_to(df: pl.DataFrame, tmp: Path, fmt: str, precision: int) -> None:
    if fmt == "parquet":
        df.write_parquet(tmp)
    else:
        tmp.write_text(_render_text(df, fmt, precision), encoding="utf-8")


def write_table(
    df: pl.DataFrame, path: str | Path, fmt: str | None, *, force: bool = False, precision: int = 4
) -> Path | None:
    """Write ``df`` to ``path`` in ``fmt`` (None: from the suffix); returns the absolute path written,
    or None for ``-`` (standard output, text formats only).

    A file is written through a temporary file in the target's folder and renamed into place, so a
    reader never sees half a table; it gets the mode a new file would (the umask), or keeps the mode of
    the file it replaces.
    """
    if str(path) == STDOUT:
        fmt = _stdout_format(fmt)
        _check_precision(precision)
        sys.stdout.write(_render_text(df, fmt, precision))
        sys.stdout.flush()
        return None
    fmt = check_format(fmt, path)
    _check_precision(precision)
    return write_output(path, lambda tmp: _write_to(df, tmp, fmt, precision), force=force)


def check_output(path: str | Path, force: bool) -> Path:
    """Refuse (HierconsoleError, nothing written) a path that `write_output` would refuse: an existing
    file without `force`, a folder, a device, a symlink without `force`, a missing parent folder."""
    return _check_target(Path(path).expanduser().absolute(), force)


def write_output(path: str | Path, write: Callable[[Path], object], *, force: bool = False) -> Path:
    """Write a file through `write(tmp)` and put it at `path`; returns the absolute path written.

    The file is written as a temporary file in the target's folder, fsynced and renamed into place, so a
    reader never sees half of it; it gets the mode a new file would (the umask), or keeps the mode of the
    file it replaces. An existing file is replaced only with `force` (tables, figures and reports alike).
    """
    path = Path(path).expanduser().absolute()
    target = _check_target(path, force)
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask()
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if force:
            os.replace(tmp, target)
        else:
            _link_new(tmp, target, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _link_new(tmp: Path, target: Path, path: Path) -> None:
    """Put `tmp` at `target` only if nothing is there: a hard link fails atomically on an existing
    name, so a file created since the check is never overwritten without --force."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise HierconsoleError(
            f"{path} already exists; not overwriting it\n  fix: pass --force, or choose another path"
        ) from None
    except OSError:
        os.replace(tmp, target)  # a file system without hard links: the check above is all there is


def _check_precision(precision: int) -> None:
    if not 0 <= precision <= MAX_PRECISION:
        raise HierconsoleError(
            f"precision {precision} is out of range\n  fix: use 0 to {MAX_PRECISION} decimals"
        )


def export_table(
    name: str,
    frames_provider: FramesProvider,
    path: str | Path,
    fmt: str | None,
    *,
    study_id: str | None = None,
    force: bool = False,
    precision: int = 4,
) -> tuple[Path | None, pl.DataFrame]:
    """Materialise table ``name`` through ``frames_provider`` and write it; returns (path, frame).

    Table, format and target are checked before the provider runs, so a typo costs no store query.
    """
    check_table(name)
    if str(path) == STDOUT:
        _stdout_format(fmt)
    else:
        fmt = check_format(fmt, path)
        _check_target(Path(path).expanduser().absolute(), force)
    frame = frames_provider(name, study_id)
    return write_table(frame, path, fmt, force=force, precision=precision), frame
