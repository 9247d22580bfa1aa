"""The per-seed wide table every analysis works on, and how it is built from stored metric rows.

A per-seed wide table is a polars DataFrame with columns ``arm`` (E_R, H_R, E_S, H_S), ``seed`` (int) and
one float column per metric, each value already averaged over the Q/G perturbations of that seed.

Bad input never turns into a silent NaN: a seed lacking an arm, a duplicated (arm, seed), an unknown arm
or a missing/non-finite value raises :class:`~hierconsole.errors.InputError` naming what is wrong.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING

import polars as pl

from hierconsole.errors import InputError
from hierconsole.factorial import GEOMETRY_CODES, OBJECTIVE_CODES, arm_codes, cells_in_order
from hierconsole.levels import PAPER_CODES, PAPER_LEVELS, WHOLE_TREE, LevelPlan, Levels, column_of
from hierconsole.vocabulary import (
    ARMS,
    BASELINE_SEED,
    BASELINES,
    HIER_METRIC,
    HIER_SCORE,
    MAP,
    TRAINED_BASELINES,
    UNTRAINED_BASELINES,
    hier_score,
)

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

KEY_COLUMNS: tuple[str, str] = ("arm", "seed")


DEFAULT_SOURCE = "per-seed table"


def normalize_arm(s: object, *, source: str = DEFAULT_SOURCE) -> str:
    """``"ER"``, ``"e_r"``, ``"E-R"``, ``" E_R "`` -> ``"E_R"`` (built-in codes, any case); an arm of one's
    own component as written (``"E_MyLoss"``); anything else is an InputError."""
    written = str(s).strip()
    text = written.upper().replace("_", "").replace("-", "").replace(" ", "")
    if len(text) == 2 and text[0] in GEOMETRY_CODES and text[1] in OBJECTIVE_CODES:
        return f"{text[0]}_{text[1]}"
    if arm_codes(written) is not None:
        return written
    raise InputError(
        source,
        f"unknown arm {s!r}",
        hint=f"an arm is a geometry code, '_' and an objective code: {', '.join(ARMS)} (or ER, HR, ES, HS), "
        "L_S, E_F, ...",
    )


def try_arm(value: object) -> str | None:
    try:
        return normalize_arm(value)
    except InputError:
        return None


def as_seed(value: object) -> int | None:
    """Seeds are integers; an integral float (a spreadsheet's ``42.0``) is accepted as the same seed."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        pass
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number.is_integer() else None


# ------------------------------------------------------------------------------------ per-seed table


def metric_columns(per_seed: pl.DataFrame) -> list[str]:
    """The metric columns of a per-seed table: every numeric column other than arm and seed."""
    return [name for name, dtype in per_seed.schema.items() if name not in KEY_COLUMNS and dtype.is_numeric()]


def _resolve_metrics(per_seed: pl.DataFrame, metrics: Sequence[str] | str | None, source: str) -> list[str]:
    valid = metric_columns(per_seed)
    if metrics is None:
        if not valid:
            raise InputError(source, "the table has no numeric metric column besides arm and seed")
        return valid
    wanted = [metrics] if isinstance(metrics, str) else list(metrics)
    unknown = [m for m in wanted if m not in valid]
    if unknown:
        problems = []
        for m in unknown:
            kind = "is not numeric" if m in per_seed.columns else "does not exist"
            problems.append(f"metric column {m!r} {kind}")
        raise InputError(source, problems, hint=f"valid metric columns: {', '.join(valid) or '(none)'}")
    return list(dict.fromkeys(wanted))


def indexed_cells(
    per_seed: pl.DataFrame, metrics: Sequence[str] | str | None, source: str
) -> tuple[list[str], dict[tuple[str, int], dict[str, float]]]:
    """Validate a per-seed table and index it as (arm, seed) -> metric -> value."""
    missing = [c for c in KEY_COLUMNS if c not in per_seed.columns]
    if missing:
        raise InputError(
            source,
            [f"missing column {c!r}" for c in missing],
            hint="a per-seed table has columns arm, seed and one column per metric",
        )
    names = _resolve_metrics(per_seed, metrics, source)
    problems: list[str] = []
    cells: dict[tuple[str, int], dict[str, float]] = {}
    for i, row in enumerate(per_seed.select(["arm", "seed", *names]).iter_rows(named=True)):
        arm = try_arm(row["arm"])
        seed = as_seed(row["seed"])
        where = f"row {i + 1}"
        if arm is None:
            problems.append(f"{where}: unknown arm {row['arm']!r} (an arm is a geometry code, '_' and an objective code, e.g. {', '.join(ARMS)})")
        if seed is None:
            problems.append(f"{where}: seed {row['seed']!r} is not an integer")
        if arm is None or seed is None:
            continue
        if (arm, seed) in cells:
            problems.append(f"{where}: duplicate row for arm {arm}, seed {seed}")
            continue
        values: dict[str, float] = {}
        for m in names:
            v = row[m]
            if v is None or not math.isfinite(float(v)):
                problems.append(f"arm {arm}, seed {seed}: metric {m!r} is {'missing' if v is None else v}")
            else:
                values[m] = float(v)
        cells[(arm, seed)] = values
    if not cells and not problems:
        problems.append("the table has no rows")
    if problems:
        raise InputError(source, problems)
    return names, cells


def arms_present(arms: Iterable[str]) -> tuple[str, ...]:
    """The factorial's cells among `arms`, in its order (`factorial.cells_in_order`)."""
    return cells_in_order(arms)



def baseline_values(
    baselines: pl.DataFrame | None, names: Sequence[str], source: str
) -> dict[str, dict[int, dict[str, float]]]:
    """baseline arm -> seed (BASELINE_SEED for an untrained one) -> metric -> value, for the metrics
    `names` of a per-seed table."""
    if baselines is None or baselines.is_empty():
        return {}
    lacking = [m for m in names if m not in baselines.columns]
    if lacking:
        raise InputError(source, f"the baseline table lacks metric(s) {', '.join(lacking)}")
    out: dict[str, dict[int, dict[str, float]]] = {}
    for r in baselines.iter_rows(named=True):
        seed = int(r["seed"]) if "seed" in baselines.columns else BASELINE_SEED
        out.setdefault(r["arm"], {})[seed] = {m: float(r[m]) for m in names}
    return {arm: out[arm] for arm in BASELINES if arm in out}



LONG_COLUMNS: tuple[str, ...] = ("seed", "arm", "perturbation", "level", "metric", "value")
_UNIFORM_COLUMNS: tuple[str, ...] = ("study_id", "aggregation", "posthoc")
"""Columns that, when present, must hold one value: averaging across them would mix estimands."""


PAPER_PLAN = LevelPlan.default(PAPER_LEVELS)
"""The plan of a three-level study (hier = middle, high): the default of every table built without one."""

LevelsLike = Levels | Sequence[str]
"""A study's levels, or just their codes, leaf first."""


def codes_of(levels: LevelsLike) -> tuple[str, ...]:
    return levels.codes if isinstance(levels, Levels) else tuple(levels)


def split_column(column: str) -> tuple[str, str]:
    """(level, metric) of a ``{level}_{metric}`` column: split at the last `_` (a level code has none, a
    metric such as ``R@10`` neither); ("", column) when it has no `_`."""
    level, _, metric = column.rpartition("_")
    return level, metric


def _defined_whole_tree(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` without the whole tree's metrics that are undefined for some row (a metric no query of a
    cell is defined for, e.g. mistake severity@1 of a model whose every first item is its query's leaf):
    left out of the tables rather than stopping every other metric's."""
    tree = df.filter(pl.col("level") == WHOLE_TREE)
    if tree.is_empty():
        return df
    undefined = tree.filter(pl.col("value").is_null() | pl.col("value").is_nan())["metric"].unique().to_list()
    return df.filter(~((pl.col("level") == WHOLE_TREE) & pl.col("metric").is_in(undefined)))


def _is_ranking(metric: str) -> bool:
    return metric == MAP or (metric.startswith("R@") and metric[2:].isdigit())


@cache
def _order(codes: tuple[str, ...]) -> Callable[[str], tuple]:
    def order(column: str) -> tuple:
        level, metric = split_column(column)
        if column == HIER_METRIC:
            return (0, len(codes), 0, "")
        if level in codes and metric == MAP:
            return (0, codes.index(level), 0, "")
        if level in codes and metric.startswith("R@") and metric[2:].isdigit():
            return (1, codes.index(level), int(metric[2:]), "")
        return (2, 0, 0, column)

    return order


def metric_order_for(levels: LevelsLike) -> Callable[[str], tuple]:
    """Sort key of metric columns: every level's mAP leaf to top, hier_mAP, then R@K by level and K, then
    anything else by name."""
    return _order(codes_of(levels))


metric_order = metric_order_for(PAPER_CODES)
"""The sort key of a three-level table's metric columns (:func:`metric_order_for`)."""


def table_levels(columns: Iterable[str]) -> tuple[str, ...]:
    """The level codes of a per-seed table's ``{level}_{mAP or R@K}`` columns, leaf first.

    A table written by :func:`per_seed_from_long` holds them in level order, so their first appearance
    gives the order. A table whose level columns are all three-level codes, or that has none, is a
    three-level table (leaf, middle, high whatever columns it lacks: a level without valid queries is
    left out); no tree of another depth has only those codes (`hierconsole.levels.level_codes`).
    """
    found: dict[str, None] = {}
    for column in columns:
        level, metric = split_column(column)
        if level and level != HIER_SCORE and _is_ranking(metric):
            found.setdefault(level)
    if set(found) <= set(PAPER_CODES):
        return PAPER_CODES
    return tuple(found)


def per_seed_from_long(
    df: pl.DataFrame,
    *,
    source: str = "metrics table",
    excluded: Sequence[str] = (),
    plan: LevelPlan = PAPER_PLAN,
) -> pl.DataFrame:
    """Turn stored metric rows into the per-seed wide table (:func:`per_perturbation_from_long`, then the
    Q/G perturbations of each (arm, seed) averaged)."""
    table = per_perturbation_from_long(df, source=source, excluded=excluded, plan=plan)
    columns = [c for c in table.columns if c not in (*KEY_COLUMNS, PERTURBATION)]
    # Averaged in a fixed order (by perturbation, as stored) with fmean, as the per-seed values always were.
    rows = [
        {"arm": arm, "seed": seed, **{c: statistics.fmean(group[c].to_list()) for c in columns}}
        for (arm, seed), group in table.group_by(["arm", "seed"], maintain_order=True)
    ]
    schema = {"arm": pl.String, "seed": pl.Int64, **{c: pl.Float64 for c in columns}}
    return pl.DataFrame(rows, schema=schema)


PERTURBATION = "perturbation"


def per_perturbation_from_long(
    df: pl.DataFrame,
    *,
    source: str = "metrics table",
    excluded: Sequence[str] = (),
    plan: LevelPlan = PAPER_PLAN,
) -> pl.DataFrame:
    """Stored metric rows as one wide row per (arm, seed, perturbation): what the per-seed table averages,
    kept apart for what needs the Q/G draws themselves (the within-seed variance).

    Input columns: seed, arm, perturbation, level, metric, value (study_id, aggregation and posthoc may
    be present but must then hold a single value - filter first). Output columns: arm, seed,
    perturbation, then ``{level}_{metric}`` in :func:`metric_order_for` order. The levels are the study's
    (`plan.levels`; default: the three-level plan). ``hier_mAP`` is added when the mAP of every level of
    `plan.hier` exists (three levels: middle and high): the mean of those only (never the leaf), computed
    per perturbation, so that its per-seed average equals the mean of the averaged levels (the mean is
    linear, up to float rounding). Within a seed every
    arm must have the same perturbations, and each (arm, seed, perturbation) every metric, so that the
    averages stay paired.

    `excluded` names levels the study found without valid queries when its splits were made
    (`datasets.splits.empty_levels`): their rows are dropped, and ``hier_mAP`` is the mean of the hier
    levels left (`hier_score`), never a hole that stops the other levels' tables.
    """
    missing = [c for c in LONG_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            source, [f"missing column {c!r}" for c in missing], hint=f"need {', '.join(LONG_COLUMNS)}"
        )
    codes = plan.levels.codes
    unknown = [level for level in excluded if level not in codes]
    if unknown:
        raise ValueError(f"unknown level(s) to exclude: {', '.join(unknown)}")
    if excluded:
        df = df.filter(~pl.col("level").is_in(list(excluded)))
    df = _defined_whole_tree(df)
    problems = []
    for c in _UNIFORM_COLUMNS:
        if c in df.columns and df[c].n_unique() > 1:
            values = ", ".join(map(str, sorted(df[c].unique().to_list(), key=str)))
            problems.append(f"column {c!r} mixes several values ({values}); select one before averaging")
    if problems:
        raise InputError(source, problems)

    cells: dict[tuple[str, int, object], dict[str, float]] = {}
    for i, row in enumerate(df.select(LONG_COLUMNS).iter_rows(named=True)):
        where = f"row {i + 1}"
        arm, seed = try_arm(row["arm"]), as_seed(row["seed"])
        bad = []
        if arm is None:
            bad.append(f"unknown arm {row['arm']!r}")
        if seed is None:
            bad.append(f"seed {row['seed']!r} is not an integer")
        if row["level"] not in codes and row["level"] != WHOLE_TREE:
            bad.append(f"unknown level {row['level']!r} (valid: {', '.join(codes)})")
        value = row["value"]
        if value is None or not math.isfinite(float(value)):
            bad.append(f"value of {row['level']}_{row['metric']} is {'missing' if value is None else value}")
        if bad:
            problems.append(f"{where} (arm {row['arm']}, seed {row['seed']}): " + "; ".join(bad))
            continue
        assert arm is not None and seed is not None  # a None one was added to `bad` above
        column = column_of(row["level"], row["metric"])
        cell = cells.setdefault((arm, seed, row["perturbation"]), {})
        if column in cell:
            problems.append(
                f"{where}: duplicate {column} for arm {arm}, seed {seed}, perturbation {row['perturbation']}"
            )
            continue
        cell[column] = float(value)
    if not cells and not problems:
        problems.append("the table has no rows")
    if problems:
        raise InputError(source, problems)

    columns = sorted({c for cell in cells.values() for c in cell}, key=metric_order_for(codes))
    for (arm, seed, pert), cell in cells.items():
        lacking = [c for c in columns if c not in cell]
        if lacking:
            problems.append(f"arm {arm}, seed {seed}, perturbation {pert}: missing {', '.join(lacking)}")
    perts: dict[int, dict[str, set]] = {}
    for arm, seed, pert in cells:
        perts.setdefault(seed, {}).setdefault(arm, set()).add(pert)
    for seed, by_arm in perts.items():
        if len({frozenset(p) for p in by_arm.values()}) > 1:
            detail = "; ".join(
                f"{a}: {', '.join(map(str, sorted(p, key=str)))}" for a, p in sorted(by_arm.items())
            )
            problems.append(f"seed {seed}: arms have different perturbations ({detail})")
    if problems:
        raise InputError(
            source, problems, hint="every arm of a seed needs every metric for the same perturbations"
        )

    columns = _with_hier(cells, columns, plan, excluded)

    # Arms in ARMS order, seeds ascending, perturbations in the order they came (the per-seed mean sums
    # them in that order, so its value is the one it always was, bit for bit).
    arm_rank = {a: i for i, a in enumerate(cells_in_order(a for a, _, _ in cells))}
    order = sorted(cells, key=lambda key: (arm_rank[key[0]], key[1]))
    rows = [{"arm": arm, "seed": seed, PERTURBATION: pert, **cells[(arm, seed, pert)]} for arm, seed, pert in order]
    schema: dict[str, PolarsDataType] = {
        "arm": pl.String,
        "seed": pl.Int64,
        PERTURBATION: df.schema[PERTURBATION],
        **{c: pl.Float64 for c in columns},
    }
    return pl.DataFrame(rows, schema=schema)


def _with_hier(
    cells: dict[tuple[str, int, object], dict[str, float]],
    columns: list[str],
    plan: LevelPlan,
    excluded: Sequence[str],
) -> list[str]:
    """Add ``hier_mAP`` to every cell (in place) when each hier level left has its mAP, and return the
    columns with it: the hier score of `plan.hier` less the excluded levels, added in level order."""
    kept = [level for level in plan.hier if level not in excluded]
    if not kept or not all(f"{level}_{MAP}" in columns for level in kept):
        return columns
    for cell in cells.values():
        cell[HIER_METRIC] = hier_score({level: cell[f"{level}_{MAP}"] for level in kept}, hier=kept)
    return sorted([*columns, HIER_METRIC], key=metric_order_for(plan.levels))


def baselines_from_long(
    df: pl.DataFrame,
    *,
    source: str = "metrics table",
    excluded: Sequence[str] = (),
    plan: LevelPlan = PAPER_PLAN,
) -> pl.DataFrame:
    """Stored metric rows of the baseline arms -> one row per baseline and seed: arm, seed, metric columns.

    An untrained baseline's rows carry seed BASELINE_SEED (it has no training seed); a trained one's
    (TRAINED_BASELINES) carry their training seeds. Q/G perturbations are averaged as a seed's are in
    :func:`per_seed_from_long`, and ``hier_mAP`` is computed per perturbation first, the same way. Every
    baseline needs every metric on the same perturbations.
    """
    columns, cells, perts = _baseline_cells(df, source, excluded, plan)
    rows = [
        {
            "arm": arm,
            "seed": seed,
            **{c: statistics.fmean(cells[(arm, seed, p)][c] for p in sorted(perts[(arm, seed)], key=str)) for c in columns},
        }
        for arm in BASELINES
        for seed in sorted(s for a, s in perts if a == arm)
    ]
    return pl.DataFrame(rows, schema={"arm": pl.String, "seed": pl.Int64, **{c: pl.Float64 for c in columns}})


def baseline_perturbations_from_long(
    df: pl.DataFrame,
    *,
    source: str = "metrics table",
    excluded: Sequence[str] = (),
    plan: LevelPlan = PAPER_PLAN,
) -> pl.DataFrame:
    """The baseline arms' rows as :func:`per_perturbation_from_long` gives the cells': arm, seed,
    perturbation, metric columns (validated as :func:`baselines_from_long` does)."""
    columns, cells, perts = _baseline_cells(df, source, excluded, plan)
    rows = [
        {"arm": arm, "seed": seed, PERTURBATION: p, **cells[(arm, seed, p)]}
        for arm in BASELINES
        for seed in sorted(s for a, s in perts if a == arm)
        for p in sorted(perts[(arm, seed)], key=str)
    ]
    schema: dict[str, PolarsDataType] = {
        "arm": pl.String,
        "seed": pl.Int64,
        PERTURBATION: df.schema[PERTURBATION],
        **{c: pl.Float64 for c in columns},
    }
    return pl.DataFrame(rows, schema=schema)


def _baseline_cells(
    df: pl.DataFrame, source: str, excluded: Sequence[str] = (), plan: LevelPlan = PAPER_PLAN
) -> tuple[list[str], dict[tuple[str, int, object], dict[str, float]], dict[tuple[str, int], set]]:
    """Validated baseline rows: the metric columns, (arm, seed, perturbation) -> column -> value (with
    hier_mAP), and (arm, seed) -> its perturbations; the `excluded` levels' rows dropped, as for the cells."""
    if excluded:
        df = df.filter(~pl.col("level").is_in(list(excluded)))
    missing = [c for c in LONG_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            source, [f"missing column {c!r}" for c in missing], hint=f"need {', '.join(LONG_COLUMNS)}"
        )
    df = _defined_whole_tree(df)
    problems = []
    cells: dict[tuple[str, int, object], dict[str, float]] = {}
    for i, row in enumerate(df.select(LONG_COLUMNS).iter_rows(named=True)):
        where = f"row {i + 1} (arm {row['arm']})"
        value = row["value"]
        if row["arm"] not in BASELINES:
            problems.append(f"{where}: not a baseline arm (valid: {', '.join(BASELINES)})")
        elif row["arm"] in UNTRAINED_BASELINES and row["seed"] != BASELINE_SEED:
            problems.append(f"{where}: an untrained baseline's rows carry seed {BASELINE_SEED}, not {row['seed']}")
        elif row["arm"] in TRAINED_BASELINES and (row["seed"] is None or row["seed"] < 0):
            problems.append(f"{where}: a trained baseline's rows carry its training seed, not {row['seed']}")
        elif value is None or not math.isfinite(float(value)):
            problems.append(f"{where}: value of {row['level']}_{row['metric']} is {value}")
        else:
            cell = cells.setdefault((row["arm"], int(row["seed"]), row["perturbation"]), {})
            column = column_of(row["level"], row["metric"])
            if column in cell:
                problems.append(f"{where}: duplicate {column} for perturbation {row['perturbation']}")
            cell[column] = float(value)
    columns = sorted({c for cell in cells.values() for c in cell}, key=metric_order_for(plan.levels))
    perts = {(arm, seed): {p for a, s, p in cells if (a, s) == (arm, seed)} for arm, seed, _ in cells}
    if len({frozenset(p) for p in perts.values()}) > 1:
        problems.append("baselines were scored on different perturbations")
    problems += [
        f"arm {a}, perturbation {p}: missing {', '.join(c for c in columns if c not in cell)}"
        for (a, _, p), cell in cells.items()
        if len(cell) != len(columns)
    ]
    if problems:
        raise InputError(source, problems)
    columns = _with_hier(cells, columns, plan, excluded)
    return columns, cells, perts
