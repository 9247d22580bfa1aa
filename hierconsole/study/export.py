"""Tables out as CSV, Parquet, JSON, Markdown or LaTeX, and the flat frames of the analysis results.

CSV, Parquet and JSON keep full float precision (they are data); Markdown and LaTeX are for reading,
so they round to ``precision`` and merge a ``mean``/``sd`` column pair (or ``X_mean``/``X_sd``) into one
"mean ± SD" cell as the paper's tables do. Files are written atomically (temp file in the same folder,
fsync, ``os.replace``) and never overwrite an existing file unless asked to.

The store side is a plain callable ``(table, study_id) -> polars.DataFrame`` (:data:`FramesProvider`),
so this module knows nothing about DuckDB.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import polars as pl

from hierconsole.errors import HierconsoleError, InputError, NotFoundError
from hierconsole.study.effects import (
    Effect,
    Redistribution,
    SimpleEffects,
    arm_table,
    iter_effects,
    redistribution,
    seeds_of,
    simple_effects,
)
from hierconsole.vocabulary import ARMS, BASELINES, HIER_METRIC, LEVELS, MAP

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

TABLES: dict[str, str] = {
    "runs": "one row per training run: study, seed, arm, state, timings and hashes",
    "metrics": "every stored metric value: run, seed, arm, Q/G perturbation, aggregation, level, metric",
    "arms": "per arm, mean ± SD over seeds of leaf, middle, high and hierarchy mAP (paper Table 1)",
    "effects": "simple effects geom_R, geom_S, loss_E, loss_H, interaction per metric, per seed and mean ± SD",
    "recall": "per arm and level, Recall@K mean ± SD over seeds (paper Table S8)",
    "deviation": "the cells then the baselines, each with leaf, middle and high mAP and Recall@K mean ± SD",
    "redistribution": "H_S - E_S and H_R - E_R per level, per seed, with the 'finer down, highest up' flag",
    "audits": "fairness and leakage checks with their result and evidence",
    "tuning": "temperature tuning candidates per geometry with validation scores and the winner",
}
"""Exportable table names and what each holds."""

FAMILY_TABLES: dict[str, str] = {
    "contrasts": "a family's declared contrasts: per arm pair and level, per seed, mean ± SD, positive seeds",
}
"""Tables of a family (`export TABLE --family F`) rather than of one study."""

ANALYSIS_TABLES: tuple[str, ...] = ("arms", "effects", "recall", "deviation", "redistribution")
"""Tables computed from a per-seed wide table (see :func:`analysis_frame`)."""

FramesProvider = Callable[[str, str | None], pl.DataFrame]
"""Materialises a table from the store: ``provider(table, study_id) -> DataFrame``."""

MAX_PRECISION = 12


def _listing(options: dict[str, str]) -> str:
    width = max(map(len, options))
    return "\n".join(f"    {name.ljust(width)}  {text}" for name, text in options.items())


def check_table(name: str) -> str:
    if name not in TABLES:
        raise NotFoundError(f"unknown table {name!r}; valid tables:\n{_listing(TABLES)}")
    return name


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
        raise HierconsoleError(f"unknown format {fmt!r}; valid formats:\n{_listing(FORMATS)}")
    return key


STDOUT = "-"
"""`-o -`: write a text format to standard output."""
TEXT_FORMATS = ("csv", "json", "md", "latex")


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
    """The format to write to standard output: given (there is no suffix), and a text one."""
    if fmt is None:
        raise HierconsoleError(
            f"-o - has no suffix to tell the format from\n  fix: pass --format, one of: {', '.join(TEXT_FORMATS)}"
        )
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


def _cell(value: object, precision: int) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{precision}f}"
    return str(value)


def _display_rows(df: pl.DataFrame, precision: int, pm: str) -> tuple[list[str], list[bool], list[list[str]]]:
    """Headers, right-alignment flags and text cells, with mean/sd pairs merged as ``mean{pm}sd``."""
    pairs = _mean_sd_pairs(df.columns)
    hidden = {sd for _, sd in pairs.values()}
    headers: list[str] = []
    numeric: list[bool] = []
    getters: list[tuple[str, str | None]] = []  # (mean or plain column, its SD column or None)
    for c in df.columns:
        if c in hidden:
            continue
        if c in pairs:
            headers.append("mean ± SD" if c == "mean" else c[: -len("_mean")])
            numeric.append(True)
            getters.append(pairs[c])
        else:
            headers.append(c)
            numeric.append(df.schema[c].is_numeric())
            getters.append((c, None))
    rows = []
    for record in df.iter_rows(named=True):
        cells = []
        for mean_c, sd_c in getters:
            if sd_c is None:
                cells.append(_cell(record[mean_c], precision))
                continue
            mean, sd = record[mean_c], record[sd_c]
            if mean is None:
                cells.append("")
            else:
                # One seed has no sample SD; say so rather than print a misleading 0.
                cells.append(
                    f"{_cell(float(mean), precision)}{pm}{'n/a' if sd is None else _cell(float(sd), precision)}"
                )
        rows.append(cells)
    return headers, numeric, rows


def render_markdown(df: pl.DataFrame, precision: int = 4) -> str:
    """A GitHub-flavoured pipe table; numbers right-aligned, mean ± SD merged."""
    headers, numeric, rows = _display_rows(df, precision, " ± ")

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
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``); mean $\\pm$ SD merged."""
    marker = "\x00"  # stands in for ± until the text around it is escaped
    headers, numeric, rows = _display_rows(df, precision, marker)

    def esc(text: str) -> str:
        return latex_escape(text).replace(marker, r" $\pm$ ")

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
    path = Path(path).expanduser().absolute()
    target = _check_target(path, force)
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask()
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        _write_to(df, tmp, fmt, precision)
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


# ------------------------------------------------------------------------------- analysis frames


def _seed_column(seed: int) -> str:
    return f"seed_{seed}"


def effects_frame(effects: SimpleEffects) -> pl.DataFrame:
    """One row per (metric, effect): definition, ``seed_<s>`` per seed, mean, sd, positive_seeds, n_seeds."""
    seeds = seeds_of(effects)
    rows = []
    for e in iter_effects(effects):
        rows.append(
            {
                "metric": e.metric,
                "effect": e.name,
                "definition": e.definition,
                **{_seed_column(s): e.per_seed[s] for s in seeds},
                "mean": e.mean,
                "sd": e.sd,
                "positive_seeds": e.positive_seeds,
                "n_seeds": e.n_seeds,
            }
        )
    schema = {
        "metric": pl.String,
        "effect": pl.String,
        "definition": pl.String,
        **{_seed_column(s): pl.Float64 for s in seeds},
        "mean": pl.Float64,
        "sd": pl.Float64,
        "positive_seeds": pl.Int64,
        "n_seeds": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


MAP_METRICS: tuple[str, ...] = (*(f"{level}_{MAP}" for level in LEVELS), HIER_METRIC)


def arms_frame(arm_long: pl.DataFrame, metrics: Sequence[str] | None = None) -> pl.DataFrame:
    """Paper Table 1 shape from :func:`~hierconsole.effects.arm_table`: arm, n, ``<metric>_mean/_sd``.

    Default metrics: the mAP columns (leaf, middle, high, hier) when present, otherwise all of them;
    Recall@K has its own table (:func:`recall_frame`).
    """
    available = list(dict.fromkeys(arm_long["metric"].to_list()))
    if metrics is None:
        metrics = [m for m in MAP_METRICS if m in available] or available
    rows = []
    for arm in (*ARMS, *BASELINES):
        part = arm_long.filter(pl.col("arm") == arm)
        if part.is_empty():
            continue
        by_metric = {r["metric"]: r for r in part.iter_rows(named=True)}
        row: dict[str, object] = {"arm": arm, "n": _seeds_of(by_metric.values())}
        for m in metrics:
            r = by_metric.get(m)
            row[f"{m}_mean"] = None if r is None else r["mean"]
            row[f"{m}_sd"] = None if r is None else r["sd"]
        rows.append(row)
    schema = {"arm": pl.String, "n": pl.Int64}
    for m in metrics:
        schema |= {f"{m}_mean": pl.Float64, f"{m}_sd": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def deviation_frame(arm_long: pl.DataFrame) -> pl.DataFrame:
    """The baselines' deviation from the cells in one table: every arm (cells, then baselines) with each
    level's mAP and Recall@K, so that "finer down, coarser up" reads along a row."""
    available = set(arm_long["metric"].to_list())
    ks = sorted({int(m.partition("_R@")[2]) for m in available if m.partition("_R@")[2].isdigit()})
    metrics = [
        m
        for level in LEVELS
        for m in (f"{level}_{MAP}", *(f"{level}_R@{k}" for k in ks))
        if m in available
    ]
    return arms_frame(arm_long, metrics)


def _seeds_of(rows: Iterable[dict]) -> int | None:
    """The n (seeds) of an arm's rows; None for a baseline arm, which has no training seed."""
    ns = [r["n"] for r in rows if r["n"] is not None]
    return max(ns) if ns else None


def recall_frame(arm_long: pl.DataFrame, *, source: str = "arm table") -> pl.DataFrame:
    """Paper Table S8 shape: arm, level, n, ``R@<k>_mean/_sd`` for each K found in ``<level>_R@<k>``."""
    ks = sorted(
        {
            int(m.partition("_R@")[2])
            for m in arm_long["metric"].to_list()
            if m.partition("_R@")[0] in LEVELS and m.partition("_R@")[2].isdigit()
        }
    )
    if not ks:
        raise InputError(source, "no Recall@K metric columns (named like leaf_R@1)")
    rows = []
    for arm in (*ARMS, *BASELINES):
        part = {r["metric"]: r for r in arm_long.filter(pl.col("arm") == arm).iter_rows(named=True)}
        for level in LEVELS:
            found = {k: part.get(f"{level}_R@{k}") for k in ks}
            if not any(found.values()):
                continue
            row: dict[str, object] = {
                "arm": arm,
                "level": level,
                "n": _seeds_of(r for r in found.values() if r),
            }
            for k, r in found.items():
                row[f"R@{k}_mean"] = None if r is None else r["mean"]
                row[f"R@{k}_sd"] = None if r is None else r["sd"]
            rows.append(row)
    schema = {"arm": pl.String, "level": pl.String, "n": pl.Int64}
    for k in ks:
        schema |= {f"R@{k}_mean": pl.Float64, f"R@{k}_sd": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def redistribution_frame(result: Redistribution) -> pl.DataFrame:
    """One row per (contrast, level): seed values, mean, sd, positive_seeds, n_seeds, pattern flag."""
    seeds = sorted(next(iter(next(iter(result.contrasts.values())).values())).per_seed)
    rows = []
    for contrast, by_level in result.contrasts.items():
        for level, e in by_level.items():
            rows.append(_redistribution_row(result, contrast, level, e, seeds))
    schema = {
        "contrast": pl.String,
        "definition": pl.String,
        "level": pl.String,
        "metric": pl.String,
        **{_seed_column(s): pl.Float64 for s in seeds},
        "mean": pl.Float64,
        "sd": pl.Float64,
        "positive_seeds": pl.Int64,
        "n_seeds": pl.Int64,
        "pattern": pl.Boolean,
        "seeds_with_pattern": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


def _redistribution_row(
    result: Redistribution, contrast: str, level: str, e: Effect, seeds: list[int]
) -> dict:
    return {
        "contrast": contrast,
        "definition": e.definition,
        "level": level,
        "metric": result.metric,
        **{_seed_column(s): e.per_seed[s] for s in seeds},
        "mean": e.mean,
        "sd": e.sd,
        "positive_seeds": e.positive_seeds,
        "n_seeds": e.n_seeds,
        "pattern": result.pattern[contrast],
        "seeds_with_pattern": result.seeds_with_pattern[contrast],
    }


def analysis_frame(
    name: str,
    per_seed: pl.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    source: str = "per-seed table",
    baselines: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The exportable frame of an analysis table (:data:`ANALYSIS_TABLES`) from a per-seed wide table.

    ``redistribution`` uses mAP; ``metrics`` narrows arms and effects.
    ``baselines`` (the study's baseline arms, `effects.baselines_from_long`) adds their rows to arms and
    recall and their contrasts to effects.
    """
    if name == "effects":
        return effects_frame(simple_effects(per_seed, metrics, source=source, baselines=baselines))
    if name == "arms":
        return arms_frame(arm_table(per_seed, metrics, source=source, baselines=baselines), metrics)
    if name == "recall":
        return recall_frame(arm_table(per_seed, metrics, source=source, baselines=baselines), source=source)
    if name == "deviation":
        return deviation_frame(arm_table(per_seed, None, source=source, baselines=baselines))
    if name == "redistribution":
        return redistribution_frame(redistribution(per_seed, "mAP", source=source))
    check_table(name)
    raise HierconsoleError(
        f"table {name!r} comes from the study store, not from a per-seed table\n"
        f"  fix: tables computable from a CSV are {', '.join(ANALYSIS_TABLES)}"
    )
