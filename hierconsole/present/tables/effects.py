"""A study's arm table, simple effects, baseline contrasts and level-wise redistribution as `Grid`s."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from rich.text import Text

from hierconsole.factorial import arms_in_order, cells_in_order, is_baseline_contrast
from hierconsole.levels import Levels
from hierconsole.plurals import counted
from hierconsole.present import numbers
from hierconsole.present.grid import Column, Grid
from hierconsole.present.levels import PAPER, codes_in, levels_from
from hierconsole.present.render import fits
from hierconsole.present.tables.evidence import Shown, summary_cells, summary_columns
from hierconsole.study.analysis.effects import Effect, SimpleEffects, seeds_of
from hierconsole.study.analysis.redistribution import Redistribution
from hierconsole.styles import arm_colour
from hierconsole.vocabulary import BASELINES, HIER_METRIC, MAP, UNTRAINED_BASELINES

PER_SEED = "per seed"
BASELINE_GROUP = "baselines"
"""Column groups a narrow form moves to tables of their own: the per-seed values, the baseline arms."""


def _seed_columns(seeds: Sequence[int]) -> list[Column]:
    return [Column(str(s), group=PER_SEED, record_header=f"seed {s}") for s in seeds]


def arm_header(arm: str, n: int | None, group: str | None = None) -> Column:
    return Column(
        arm,
        group=group,
        record_header=f"{arm} (n={n})" if n is not None else f"{arm} (no SD)",
        header_style=f"bold {arm_colour(arm) or ''}".strip(),
    )


def arms_grid(arms: pl.DataFrame, digits: int, source: str) -> Grid:
    """Metrics down, arms across: trained arms as mean ± SD over seeds, then the baselines; an untrained
    baseline as its one value (no training seed, hence no SD)."""
    present = list(arms_in_order(arms["arm"].to_list()))
    n_of = {r["arm"]: r["n"] for r in arms.iter_rows(named=True) if r["arm"] not in UNTRAINED_BASELINES}
    ns = set(n_of.values())
    over = f"over {counted(next(iter(ns)), 'seed')}" if len(ns) == 1 else "over seeds"
    trained = set(cells_in_order(present))
    title = f"Arms: mean ± sample SD {over} ({source})" if trained else "Baselines"
    baseline_group = BASELINE_GROUP if trained else None
    grid = Grid(
        title,
        [
            Column("metric", numeric=False),
            *(arm_header(a, n_of.get(a), None if a in trained else baseline_group) for a in present),
        ],
    )
    cells = {(r["arm"], r["metric"]): r for r in arms.iter_rows(named=True)}
    for metric in dict.fromkeys(arms["metric"].to_list()):
        row = [Text(metric)]
        for arm in present:
            r = cells.get((arm, metric))
            if r is None:
                row.append(numbers.plain(None))
            elif arm in n_of:
                row.append(numbers.mean_sd(r["mean"], r["sd"], digits))
            else:
                row.append(numbers.plain(r["mean"], digits))
        grid.add_row(*row)
    if len(ns) > 1:
        grid.note("seeds per arm: " + ", ".join(f"{a} n={n}" for a, n in n_of.items()))
    untrained = [a for a in present if a in UNTRAINED_BASELINES]
    if untrained:
        grid.note(f"{', '.join(untrained)}: one value each (no training seed, no SD)")
    return grid


def _effect_grid(title: str, effects: SimpleEffects, names: set[str], digits: int) -> Grid:
    seeds = seeds_of(effects)
    optional = Shown.of(e for by_name in effects.values() for n, e in by_name.items() if n in names)
    grid = Grid(
        title,
        [
            Column("metric", numeric=False),
            Column("effect", numeric=False),
            Column("definition", numeric=False, droppable=True, style="dim"),
            *_seed_columns(seeds),
            *summary_columns("seed", optional),
        ],
        key_columns=2,
    )
    for metric, by_name in effects.items():
        shown: list[Effect] = [e for n, e in by_name.items() if n in names]
        for j, e in enumerate(shown):
            grid.add_row(
                metric if j == 0 else "",
                e.name,
                e.definition,
                *(numbers.signed(e.per_unit.get(s), digits) for s in seeds),
                *summary_cells(e, digits, optional),
                end_section=j == len(shown) - 1,
            )
    return grid


def effects_grid(effects: SimpleEffects, digits: int) -> Grid:
    """The simple effects and the interaction, paired within seed, with their intervals and tests."""
    return _effect_grid("Simple effects, paired within seed", effects, factorial_names(effects), digits)


def baseline_contrasts_grid(effects: SimpleEffects, digits: int) -> Grid:
    """Each cell minus each baseline (`<arm>_vs_<baseline>`), paired within seed."""
    return _effect_grid("Cells against the baselines, paired within seed", effects, baseline_names(effects), digits)


def factorial_names(effects: SimpleEffects) -> set[str]:
    """The factorial's effects among a result's (its simple effects and interactions)."""
    return {n for by_name in effects.values() for n in by_name if not is_baseline_contrast(n)}


def baseline_names(effects: SimpleEffects) -> set[str]:
    """The arm-against-baseline contrasts among a result's."""
    return {n for by_name in effects.values() for n in by_name if is_baseline_contrast(n)}


def arm_values_grid(
    per_seed: pl.DataFrame, arms: pl.DataFrame, metric: str, digits: int, baselines: pl.DataFrame | None = None
) -> Grid:
    """One metric, arms down: each seed's value, then mean ± SD; baselines after the cells (an untrained
    one with its one value, under no seed)."""
    seeds = sorted(set(per_seed["seed"].to_list()))
    grid = Grid(f"Arms · {metric}", [Column("arm", numeric=False), *_seed_columns(seeds), Column("mean ± SD")])
    values = {(r["arm"], r["seed"]): r[metric] for r in per_seed.iter_rows(named=True)}
    if baselines is not None and metric in baselines.columns:
        values |= {(r["arm"], r["seed"]): r[metric] for r in baselines.iter_rows(named=True)}
    summary = {r["arm"]: r for r in arms.filter(pl.col("metric") == metric).iter_rows(named=True)}
    shown = arms_in_order(summary)
    last_cell = next(reversed(cells_in_order(shown)), None)
    for arm in shown:
        r = summary[arm]
        label = Text(arm, style=arm_colour(arm) or "")
        if arm in UNTRAINED_BASELINES:
            one = numbers.plain(r["mean"], digits)
            one.append(" (no SD)", style="dim")
            grid.add_row(label, *(Text("·", style="dim") for _ in seeds), one)
        else:
            grid.add_row(
                label,
                *(numbers.plain(values.get((arm, s)), digits) for s in seeds),
                numbers.mean_sd(r["mean"], r["sd"], digits),
            )
        if arm == last_cell:
            grid.end_section()  # the last cell: the baselines follow, set apart
    return grid


def levels_grid(arms: pl.DataFrame, measure: str, digits: int, levels: Levels = PAPER) -> Grid | None:
    """Levels down (finest first, then the hier score for mAP), the cells then the baselines across: the
    paper's reading — finer levels down and coarser up from a baseline to a cell — row by row. A deeper
    tree adds rows, never columns. None when the arm table has no baseline."""
    present = set(arms["arm"].to_list())
    cells = list(cells_in_order(present))
    base = [b for b in BASELINES if b in present]
    if not base:
        return None
    rows = [f"{level}_{measure}" for level in levels.codes] + ([HIER_METRIC] if measure == MAP else [])
    means = {(r["arm"], r["metric"]): r["mean"] for r in arms.iter_rows(named=True)}
    grid = Grid(
        f"Levels · {measure}: cells │ baselines",
        [Column("level", numeric=False), *(arm_header(a, None) for a in (*cells, *base))],
    )
    for metric in rows:
        if not any((a, metric) in means for a in (*cells, *base)):
            continue
        grid.add_row(
            metric.removesuffix(f"_{measure}"), *(numbers.plain(means.get((a, metric)), digits) for a in (*cells, *base))
        )
    return grid


def redistribution_levels(result: Redistribution) -> Levels:
    """The levels of a redistribution: those it carries, else the codes its contrasts are keyed by."""
    if isinstance(getattr(result, "levels", None), Levels):
        return levels_from(result)
    return codes_in(next(iter(result.contrasts.values()), {}).keys())


def _contrast_label(result: Redistribution, contrast: str) -> str:
    return f"{contrast} ({result.definition(contrast)})"


def redistribution_grid(result: Redistribution, digits: int, width: int | None = None) -> Grid:
    """Per geometry contrast and level, H − E mean ± SD, and whether the finer levels go down and the
    highest up (the paper's redistribution pattern) in how many seeds. Three levels are columns (as the
    paper prints them) while they fit `width`; more levels, or too narrow a view, put the levels down
    and the contrasts across, so a deeper tree adds rows and no number is cut."""
    levels = redistribution_levels(result)
    title = f"Level-wise redistribution of {result.metric} (finer levels down, highest level up?)"
    wide = Grid(
        title,
        [
            Column("contrast", numeric=False),
            *(Column(level) for level in levels.codes),
            Column("pattern", numeric=False),
            Column("seeds"),
        ],
    )
    for contrast, by_level in result.contrasts.items():
        flag = result.pattern[contrast]
        wide.add_row(
            _contrast_label(result, contrast),
            *(numbers.mean_sd(by_level[lv].mean, by_level[lv].sd, digits, sign=True) for lv in levels.codes),
            Text("yes" if flag else "no", style="bold" if flag else "dim"),
            numbers.count(result.seeds_with_pattern[contrast], result.n_seeds),
        )
    if levels.k <= 3:  # the paper's layout, whatever the width (render narrows it as before)
        return wide
    if width is None or fits(wide, width):
        return wide
    return _redistribution_down(result, levels, digits, title)


def _redistribution_down(result: Redistribution, levels: Levels, digits: int, title: str) -> Grid:
    """The redistribution with the levels down (leaf first) and the contrasts across, the pattern and
    its seed count as the last two rows."""
    contrasts = list(result.contrasts)
    grid = Grid(title, [Column("level", numeric=False), *(Column(_contrast_label(result, c)) for c in contrasts)])
    for level in levels.codes:
        grid.add_row(
            level,
            *(
                numbers.mean_sd(result.contrasts[c][level].mean, result.contrasts[c][level].sd, digits, sign=True)
                for c in contrasts
            ),
        )
    grid.end_section()
    grid.add_row(
        "pattern",
        *(Text("yes" if result.pattern[c] else "no", style="bold" if result.pattern[c] else "dim") for c in contrasts),
    )
    grid.add_row("seeds", *(numbers.count(result.seeds_with_pattern[c], result.n_seeds) for c in contrasts))
    return grid


def effects_legend(effects: SimpleEffects) -> list[Text]:
    """The definitions of the factorial effects shown, a few to a line (a legend never widens a view
    beyond its tables)."""
    shown = {n: e.definition for by_name in effects.values() for n, e in by_name.items() if not is_baseline_contrast(n)}
    items = [f"{n} = {d}" for n, d in shown.items()]
    return [
        Text(("effects: " if i == 0 else "         ") + ", ".join(items[i : i + 2]), style="dim")
        for i in range(0, len(items), 2)
    ]


def redistribution_bars_grid(result: Redistribution, digits: int, level: str | None = None) -> Grid:
    """Per contrast and level, a bar for the mean and for each seed, growing left when H is below E, beside
    its value; the bars are the first thing a narrow form leaves out, the values never. `level` (a code)
    narrows it to that one level (the console's level picker on a deep tree); the bars keep one scale."""
    levels = redistribution_levels(result)
    shown = levels.codes if level is None else (levels.resolve(level),)
    scale = max(
        (abs(v) for by_level in result.contrasts.values() for e in by_level.values() for v in (e.mean, *e.per_unit.values())),
        default=0.0,
    )
    grid = Grid(
        f"{result.difference} of {result.metric} per level (finer levels down, highest up?)",
        [
            Column("contrast", numeric=False),
            Column("level", numeric=False),
            Column("of", numeric=False),
            Column("◀ H below E · H above E ▶" if result.paper_geometries else "◀ below · above ▶", droppable=True),
            Column(result.difference),
        ],
        key_columns=3,
    )
    for contrast, by_level in result.contrasts.items():
        flag = result.pattern[contrast]
        label = Text(_contrast_label(result, contrast), style="bold")
        label.append(f" pattern {'yes' if flag else 'no'} ({result.seeds_with_pattern[contrast]}/{result.n_seeds})")
        for j, code in enumerate(shown):
            e = by_level[code]
            grid.add_row(
                label if j == 0 else "",
                Text(code, style="bold"),
                "mean",
                numbers.zero_bar(e.mean, scale),
                numbers.mean_sd(e.mean, e.sd, digits, sign=True),
            )
            for seed, value in sorted(e.per_unit.items()):
                grid.add_row("", "", Text(f"seed {seed}", style="dim"), numbers.zero_bar(value, scale), numbers.signed(value, digits))
        grid.end_section()
    grid.note(f"bars: full width = {numbers.fixed(scale, digits)} {result.metric}")
    return grid
