"""Arm summaries, protocol simple effects and level-wise redistribution (paper §3.4, §5.2-5.4).

Everything here works on a *per-seed wide table*: a polars DataFrame with columns ``arm`` (E_R, H_R,
E_S, H_S), ``seed`` (int) and one float column per metric, each value already averaged over the Q/G
perturbations of that seed. The training seed is the statistical unit: every SD is the sample SD (n-1)
across seeds, and effects are differences of arms *paired within a seed*.

Bad input never turns into a silent NaN: a seed lacking an arm, a duplicated (arm, seed), an unknown arm
or a missing/non-finite value raises :class:`~hierconsole.errors.InputError` naming what is wrong.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from hierconsole.errors import InputError
from hierconsole.vocabulary import (
    ARMS,
    BASELINE_SEED,
    BASELINES,
    HIER_LEVELS,
    HIER_METRIC,
    LEVELS,
    MAP,
    TRAINED_BASELINES,
    UNTRAINED_BASELINES,
    hier_score,
)

KEY_COLUMNS: tuple[str, str] = ("arm", "seed")


@dataclass(frozen=True)
class Contrast:
    """A paired difference ``plus - minus`` of two arms, or of two contrasts (the interaction).

    The one definition of an effect: its value (evaluated in the written order, so the rounding is that
    of the formula as written), its text and its SQL (the views in `study/views.py`) all come from it.
    """

    plus: str | Contrast
    minus: str | Contrast

    def value(self, arms: Mapping[str, float]) -> float:
        return _term_value(self.plus, arms) - _term_value(self.minus, arms)

    def text(self) -> str:
        return _render(self, str)

    def sql(self) -> str:
        """The difference over a row whose columns are the arms (as PIVOT makes them)."""
        return _render(self, lambda arm: f'"{arm}"')

    @property
    def arms(self) -> frozenset[str]:
        return frozenset().union(*(t.arms if isinstance(t, Contrast) else {t} for t in (self.plus, self.minus)))


def _term_value(term: str | Contrast, arms: Mapping[str, float]) -> float:
    return term.value(arms) if isinstance(term, Contrast) else arms[term]


def _render(contrast: Contrast, name: Callable[[str], str]) -> str:
    def part(term: str | Contrast) -> str:
        return f"({_render(term, name)})" if isinstance(term, Contrast) else name(term)

    return f"{part(contrast.plus)} - {part(contrast.minus)}"


CONTRASTS: dict[str, Contrast] = {
    "geom_R": Contrast("H_R", "E_R"),
    "geom_S": Contrast("H_S", "E_S"),
    "loss_E": Contrast("E_S", "E_R"),
    "loss_H": Contrast("H_S", "H_R"),
    "interaction": Contrast(Contrast("H_S", "E_S"), Contrast("H_R", "E_R")),
}
"""Simple effects of paper Eq. (12)-(13) and the interaction, by name, in display order."""

EFFECTS: dict[str, str] = {name: contrast.text() for name, contrast in CONTRASTS.items()}
"""name -> definition, e.g. "geom_R" -> "H_R - E_R"."""

BASELINE_CONTRASTS: dict[str, Contrast] = {
    f"{arm}_vs_{baseline}": Contrast(arm, baseline) for baseline in BASELINES for arm in ARMS
}
"""Each trained arm minus each baseline arm ("E_S_vs_frozen" = E_S - frozen): the baseline has one value
(per metric, perturbations averaged) that every seed of the arm is paired with."""

BASELINE_EFFECTS: dict[str, str] = {name: contrast.text() for name, contrast in BASELINE_CONTRASTS.items()}

REDISTRIBUTION_CONTRASTS: tuple[str, str] = ("geom_S", "geom_R")
"""H_S - E_S (under taxonomy SupCon) first, as in paper §5.4, then H_R - E_R (under regression)."""

DEFAULT_SOURCE = "per-seed table"


@dataclass(frozen=True)
class Effect:
    """One contrast of one metric across paired seeds."""

    metric: str
    name: str
    per_seed: dict[int, float]
    mean: float
    sd: float | None
    """Sample SD (ddof=1); None when only one seed exists, since a spread of one value is undefined."""
    positive_seeds: int
    n_seeds: int

    @property
    def definition(self) -> str:
        return EFFECTS.get(self.name) or BASELINE_EFFECTS[self.name]


SimpleEffects = dict[str, dict[str, Effect]]
"""metric -> effect name (in :data:`EFFECTS` order) -> :class:`Effect`."""


@dataclass(frozen=True)
class Redistribution:
    """H_S - E_S and H_R - E_R of one metric at each level (paper §5.4)."""

    metric: str
    contrasts: dict[str, dict[str, Effect]]
    """contrast (geom_S, geom_R) -> level (leaf, middle, high) -> Effect of column ``{level}_{metric}``."""
    pattern: dict[str, bool]
    """contrast -> whether the means go down at leaf and middle and up at high."""
    seeds_with_pattern: dict[str, int]
    """contrast -> number of seeds showing that sign pattern on their own."""
    n_seeds: int


# ---------------------------------------------------------------------------------------------- arms


def normalize_arm(s: object, *, source: str = DEFAULT_SOURCE) -> str:
    """``"ER"``, ``"e_r"``, ``"E-R"``, ``" E_R "`` -> ``"E_R"``; anything else is an InputError."""
    text = str(s).strip().upper().replace("_", "").replace("-", "").replace(" ", "")
    if len(text) == 2 and text[0] in "EH" and text[1] in "RS":
        return f"{text[0]}_{text[1]}"
    raise InputError(source, f"unknown arm {s!r}", hint=f"use one of {', '.join(ARMS)} (or ER, HR, ES, HS)")


def _try_arm(value: object) -> str | None:
    try:
        return normalize_arm(value)
    except InputError:
        return None


def _as_seed(value: object) -> int | None:
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


def _cells(
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
        arm = _try_arm(row["arm"])
        seed = _as_seed(row["seed"])
        where = f"row {i + 1}"
        if arm is None:
            problems.append(f"{where}: unknown arm {row['arm']!r} (valid: {', '.join(ARMS)})")
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


def _summary(values: Sequence[float]) -> tuple[float, float | None]:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    return mean, sd


def arm_table(
    per_seed: pl.DataFrame,
    metrics: Sequence[str] | str | None = None,
    *,
    source: str = DEFAULT_SOURCE,
    baselines: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Mean and sample SD over seeds per arm and metric (paper Table 1 / S8), long format.

    Columns: arm, metric, mean, sd, n. Arms appear in :data:`ARMS` order, only if present; seeds need not
    be paired here (a running study may have finished some cells). ``sd`` is null when n == 1.
    ``baselines`` (see :func:`baselines_from_long`) adds their rows after the arms: the one value of an
    untrained baseline, sd and n null, since it has no training seed; mean, SD and n over the seeds of a
    trained one (HIER-style).
    """
    names, cells = _cells(per_seed, metrics, source)
    rows: list[dict[str, object]] = []
    for arm in ARMS:
        seeds = sorted(seed for a, seed in cells if a == arm)
        if not seeds:
            continue
        for m in names:
            mean, sd = _summary([cells[(arm, s)][m] for s in seeds])
            rows.append({"arm": arm, "metric": m, "mean": mean, "sd": sd, "n": len(seeds)})
    for arm, by_seed in _baseline_values(baselines, names, source).items():
        if BASELINE_SEED in by_seed:  # untrained: one value, no seed
            rows += [{"arm": arm, "metric": m, "mean": by_seed[BASELINE_SEED][m], "sd": None, "n": None} for m in names]
            continue
        for m in names:  # trained per seed (HIER-style): summarised over its seeds like a cell
            mean, sd = _summary([values[m] for _, values in sorted(by_seed.items())])
            rows.append({"arm": arm, "metric": m, "mean": mean, "sd": sd, "n": len(by_seed)})
    return pl.DataFrame(
        rows,
        schema={"arm": pl.String, "metric": pl.String, "mean": pl.Float64, "sd": pl.Float64, "n": pl.Int64},
    )


def arms_present(arms: Iterable[str]) -> tuple[str, ...]:
    """The arms among `arms`, in :data:`ARMS` order."""
    found = set(arms)
    return tuple(a for a in ARMS if a in found)


def omitted_effects(arms: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Effects that need an arm absent from `arms`: name -> the missing arms (a study training a subset
    of the cells has no value for them, which is not the same as a zero)."""
    present = set(arms)
    return {
        name: tuple(a for a in ARMS if a in contrast.arms and a not in present)
        for name, contrast in CONTRASTS.items()
        if not contrast.arms <= present
    }


def omitted_text(arms: Iterable[str]) -> str | None:
    """One line saying which effects are left out and why; None when every effect is computable."""
    omitted = omitted_effects(arms)
    if not omitted:
        return None
    parts = [f"{name} ({EFFECTS[name]}) needs {', '.join(missing)}" for name, missing in omitted.items()]
    return f"not computed, the study trains only {', '.join(arms_present(arms))}: " + "; ".join(parts)


def _paired_seeds(cells: Mapping[tuple[str, int], object], source: str) -> list[int]:
    """Seeds of the table; every seed must hold every arm the table holds (any subset of the four)."""
    seeds = sorted({seed for _, seed in cells})
    present = arms_present(a for a, _ in cells)
    problems = []
    for seed in seeds:
        lacking = [a for a in present if (a, seed) not in cells]
        if lacking:
            have = [a for a in present if (a, seed) in cells]
            problems.append(
                f"seed {seed} lacks arm(s) {', '.join(lacking)} (present: {', '.join(have)}); "
                "effects compare arms within a seed"
            )
    if problems:
        raise InputError(
            source, problems, hint="supply the same arms for every seed, or drop incomplete seeds"
        )
    return seeds


def _effect(metric: str, name: str, per_seed: dict[int, float]) -> Effect:
    values = list(per_seed.values())
    mean, sd = _summary(values)
    return Effect(
        metric=metric,
        name=name,
        per_seed=per_seed,
        mean=mean,
        sd=sd,
        positive_seeds=sum(v > 0 for v in values),
        n_seeds=len(values),
    )


def simple_effects(
    per_seed: pl.DataFrame,
    metrics: Sequence[str] | str | None = None,
    *,
    source: str = DEFAULT_SOURCE,
    baselines: pl.DataFrame | None = None,
) -> SimpleEffects:
    """Paired simple effects and the interaction (paper Eq. 12-13) for every metric.

    Each seed must hold the same arms, each exactly once; the effect is computed within the seed, then
    summarised across seeds (mean, sample SD, number of seeds where it is > 0). An effect needing an arm
    the table lacks is left out (see :func:`omitted_effects`), never filled in. With ``baselines``
    (:func:`baselines_from_long`), each arm minus each baseline (:data:`BASELINE_CONTRASTS`) follows,
    every seed paired with an untrained baseline's one value, or with a trained baseline's run of the same
    seed (a contrast against a trained baseline lacking one of the seeds is left out).
    """
    names, cells = _cells(per_seed, metrics, source)
    seeds = _paired_seeds(cells, source)
    present = arms_present(a for a, _ in cells)
    # A baseline pairs with every seed: through its one value (untrained) or its own run of that seed.
    base: dict[str, dict[int, dict[str, float]]] = {}
    for arm, by_seed in _baseline_values(baselines, names, source).items():
        matched = {s: by_seed.get(s, by_seed.get(BASELINE_SEED)) for s in seeds}
        if all(v is not None for v in matched.values()):
            base[arm] = {s: v for s, v in matched.items() if v is not None}
    paired = set(base)
    computable = {n: c for n, c in CONTRASTS.items() if c.arms <= set(present)}
    computable |= {n: c for n, c in BASELINE_CONTRASTS.items() if c.arms <= set(present) | paired}
    out: SimpleEffects = {}
    for m in names:
        out[m] = {}
        for name, contrast in computable.items():
            values = {
                s: contrast.value(
                    {**{a: cells[(a, s)][m] for a in present}, **{b: v[s][m] for b, v in base.items()}}
                )
                for s in seeds
            }
            out[m][name] = _effect(m, name, values)
    return out


def _baseline_values(
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


def effects_json(effects: SimpleEffects) -> dict:
    """The JSON shape of ``hierconsole effects --json`` (seeds as strings, sd null for one seed)."""
    return {
        metric: {
            name: {
                "per_seed": {str(s): v for s, v in e.per_seed.items()},
                "mean": e.mean,
                "sd": e.sd,
                "positive_seeds": e.positive_seeds,
                "n_seeds": e.n_seeds,
            }
            for name, e in by_effect.items()
        }
        for metric, by_effect in effects.items()
    }


def can_redistribute(per_seed: pl.DataFrame) -> bool:
    """Whether the table holds the arms of at least one redistribution contrast."""
    arms = {_try_arm(a) for a in per_seed["arm"].to_list()} if "arm" in per_seed.columns else set()
    return any(CONTRASTS[c].arms <= arms for c in REDISTRIBUTION_CONTRASTS)


def redistribution(
    per_seed: pl.DataFrame, metric: str = "mAP", *, source: str = DEFAULT_SOURCE
) -> Redistribution:
    """H_S - E_S and H_R - E_R at leaf, middle and high for one metric (``mAP``, ``R@1``, ...).

    ``pattern`` flags "finer levels down, highest level up": leaf and middle means < 0 and high mean > 0.
    A contrast whose arms the table lacks is left out; with neither, this is an InputError.
    """
    columns = {level: f"{level}_{metric}" for level in LEVELS}
    missing = [c for c in columns.values() if c not in per_seed.columns]
    if missing:
        raise InputError(
            source,
            [f"redistribution of {metric!r} needs column {c!r}" for c in missing],
            hint=f"metric columns present: {', '.join(metric_columns(per_seed)) or '(none)'}",
        )
    effects = simple_effects(per_seed, list(columns.values()), source=source)
    available = [c for c in REDISTRIBUTION_CONTRASTS if c in effects[columns[LEVELS[0]]]]
    if not available:
        needed = " or ".join(EFFECTS[c] for c in REDISTRIBUTION_CONTRASTS)
        raise InputError(source, f"redistribution needs the arms of {needed}; the table has only "
                         f"{', '.join(arms_present(per_seed['arm'].to_list()))}")
    contrasts = {c: {level: effects[col][c] for level, col in columns.items()} for c in available}
    pattern = {}
    seeds_with_pattern = {}
    for c, by_level in contrasts.items():
        leaf, middle, high = (by_level[level] for level in LEVELS)
        pattern[c] = leaf.mean < 0 and middle.mean < 0 and high.mean > 0
        seeds_with_pattern[c] = sum(
            leaf.per_seed[s] < 0 and middle.per_seed[s] < 0 and high.per_seed[s] > 0 for s in leaf.per_seed
        )
    n_seeds = next(iter(contrasts[available[0]].values())).n_seeds
    return Redistribution(
        metric=metric,
        contrasts=contrasts,
        pattern=pattern,
        seeds_with_pattern=seeds_with_pattern,
        n_seeds=n_seeds,
    )


# ------------------------------------------------------------------------------- long -> per-seed


LONG_COLUMNS: tuple[str, ...] = ("seed", "arm", "perturbation", "level", "metric", "value")
_UNIFORM_COLUMNS: tuple[str, ...] = ("study_id", "aggregation", "posthoc")
"""Columns that, when present, must hold one value: averaging across them would mix estimands."""


def _metric_order(column: str) -> tuple:
    """leaf/middle/high mAP, hier_mAP, then R@K by level and K, then anything else by name."""
    level, _, metric = column.partition("_")
    if column == HIER_METRIC:
        return (0, len(LEVELS), 0, "")
    if level in LEVELS and metric == MAP:
        return (0, LEVELS.index(level), 0, "")
    if level in LEVELS and metric.startswith("R@") and metric[2:].isdigit():
        return (1, LEVELS.index(level), int(metric[2:]), "")
    return (2, 0, 0, column)


def per_seed_from_long(df: pl.DataFrame, *, source: str = "metrics table") -> pl.DataFrame:
    """Turn stored metric rows into the per-seed wide table.

    Input columns: seed, arm, perturbation, level, metric, value (study_id, aggregation and posthoc may
    be present but must then hold a single value - filter first). Within each (arm, seed) the Q/G
    perturbations are averaged; columns are named ``{level}_{metric}``. ``hier_mAP`` is added when
    middle_mAP and high_mAP exist: the mean of those two only (never the leaf), computed per
    perturbation before averaging, which equals the mean of the averaged levels because the mean is
    linear (up to float rounding). Within a seed every arm must have the same perturbations, and each
    (arm, seed, perturbation) every metric, so that the averages stay paired.
    """
    missing = [c for c in LONG_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            source, [f"missing column {c!r}" for c in missing], hint=f"need {', '.join(LONG_COLUMNS)}"
        )
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
        arm, seed = _try_arm(row["arm"]), _as_seed(row["seed"])
        bad = []
        if arm is None:
            bad.append(f"unknown arm {row['arm']!r}")
        if seed is None:
            bad.append(f"seed {row['seed']!r} is not an integer")
        if row["level"] not in LEVELS:
            bad.append(f"unknown level {row['level']!r} (valid: {', '.join(LEVELS)})")
        value = row["value"]
        if value is None or not math.isfinite(float(value)):
            bad.append(f"value of {row['level']}_{row['metric']} is {'missing' if value is None else value}")
        if bad:
            problems.append(f"{where} (arm {row['arm']}, seed {row['seed']}): " + "; ".join(bad))
            continue
        assert arm is not None and seed is not None  # a None one was added to `bad` above
        column = f"{row['level']}_{row['metric']}"
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

    columns = sorted({c for cell in cells.values() for c in cell}, key=_metric_order)
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

    if all(f"{level}_{MAP}" in columns for level in HIER_LEVELS):
        for cell in cells.values():
            cell[HIER_METRIC] = hier_score({level: cell[f"{level}_{MAP}"] for level in HIER_LEVELS})
        columns = sorted([*columns, HIER_METRIC], key=_metric_order)

    rows = []
    for arm in ARMS:
        for seed in sorted({s for a, s, _ in cells if a == arm}):
            group = [cell for (a, s, _), cell in cells.items() if a == arm and s == seed]
            rows.append(
                {"arm": arm, "seed": seed, **{c: statistics.fmean(g[c] for g in group) for c in columns}}
            )
    schema = {"arm": pl.String, "seed": pl.Int64, **{c: pl.Float64 for c in columns}}
    return pl.DataFrame(rows, schema=schema)


def baselines_from_long(df: pl.DataFrame, *, source: str = "metrics table") -> pl.DataFrame:
    """Stored metric rows of the baseline arms -> one row per baseline and seed: arm, seed, metric columns.

    An untrained baseline's rows carry seed BASELINE_SEED (it has no training seed); a trained one's
    (TRAINED_BASELINES) carry their training seeds. Q/G perturbations are averaged as a seed's are in
    :func:`per_seed_from_long`, and ``hier_mAP`` is computed per perturbation first, the same way. Every
    baseline needs every metric on the same perturbations.
    """
    missing = [c for c in LONG_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            source, [f"missing column {c!r}" for c in missing], hint=f"need {', '.join(LONG_COLUMNS)}"
        )
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
            column = f"{row['level']}_{row['metric']}"
            if column in cell:
                problems.append(f"{where}: duplicate {column} for perturbation {row['perturbation']}")
            cell[column] = float(value)
    columns = sorted({c for cell in cells.values() for c in cell}, key=_metric_order)
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
    if all(f"{level}_{MAP}" in columns for level in HIER_LEVELS):
        for cell in cells.values():
            cell[HIER_METRIC] = hier_score({level: cell[f"{level}_{MAP}"] for level in HIER_LEVELS})
        columns = sorted([*columns, HIER_METRIC], key=_metric_order)
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


# ----------------------------------------------------------------------------------------- CSV


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
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            body = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except FileNotFoundError:
        raise InputError(source, "file not found", hint="check the path given to --from-csv") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(source, f"cannot read the file as CSV: {exc}") from None
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
        arm, seed = _try_arm(arm_text), _as_seed(seed_text)
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


def seeds_of(effects: SimpleEffects) -> list[int]:
    """The seeds of an effects result, ascending (every metric and effect shares them)."""
    for by_effect in effects.values():
        for e in by_effect.values():
            return sorted(e.per_seed)
    return []


def iter_effects(effects: SimpleEffects) -> Iterable[Effect]:
    for by_effect in effects.values():
        yield from by_effect.values()


# ---------------------------------------------------------------------------- pooled over studies


@dataclass(frozen=True)
class PooledEffect:
    """One effect with the study (an outer split, a family member) as the unit: each study's value is its
    effect averaged over its seeds; the summary is over studies (sample SD, positive studies)."""

    metric: str
    name: str
    per_study: dict[str, float]
    mean: float
    sd: float | None
    positive: int
    n: int

    @property
    def definition(self) -> str:
        return EFFECTS[self.name]


def pooled_effects(tables: Mapping[str, pl.DataFrame], metric: str = HIER_METRIC) -> dict[str, PooledEffect]:
    """The effects every study in `tables` (label -> per-seed table) can compute, pooled across studies.

    Within a study the effect is paired by seed and averaged over seeds; across studies nothing is paired
    (outer splits have different test sets), so only the study-level values are summarised.
    """
    per_study: dict[str, dict[str, float]] = {}
    for label, table in tables.items():
        effects = simple_effects(table, metric, source=label)[metric]
        per_study[label] = {name: e.mean for name, e in effects.items()}
    common = [n for n in CONTRASTS if all(n in values for values in per_study.values())]
    out = {}
    for name in common:
        values = {label: per_study[label][name] for label in tables}
        mean, sd = _summary(list(values.values()))
        out[name] = PooledEffect(
            metric=metric,
            name=name,
            per_study=values,
            mean=mean,
            sd=sd,
            positive=sum(v > 0 for v in values.values()),
            n=len(values),
        )
    return out
