"""Rich renderables of analysis results for the effects and redistribution views.

Presentation only: every number comes from `hierconsole.study.analysis.effects` (arm table, simple effects,
redistribution) or straight from the per-seed table; nothing is computed here but widths and colours.
"""

from __future__ import annotations

import io

import polars as pl
from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hierconsole.factorial import EFFECTS
from hierconsole.study.analysis.effects import SimpleEffects
from hierconsole.study.analysis.redistribution import Redistribution
from hierconsole.tui import format as fmt
from hierconsole.vocabulary import ARMS, BASELINES, HIER_METRIC, LEVELS, MAP, UNTRAINED_BASELINES

DIGITS = 4
SHORT_DEFINITIONS = {name: definition.replace(" ", "") for name, definition in EFFECTS.items()}
CONTRAST_LOSS = {"geom_S": "taxonomy SupCon", "geom_R": "regression"}


def natural_width(renderable: RenderableType) -> int:
    """Cells `renderable` takes unsqueezed: a view this wide scrolls sideways rather than cut numbers."""
    console = Console(width=10_000, file=io.StringIO(), color_system=None)
    return Measurement.get(console, console.options, renderable).maximum


def _table(title: str) -> Table:
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        show_edge=False,
    )


def arm_values_table(
    per_seed: pl.DataFrame, arms: pl.DataFrame, metric: str, baselines: pl.DataFrame | None = None
) -> Table:
    """Per arm: the per-seed values of `metric`, then mean ± SD from the arm table. With `baselines`
    (`effects.baselines_from_long`), their rows follow, set apart: a trained one (HIER-style) with its
    per-seed values, an untrained one with its one value (no SD)."""
    seeds = sorted(set(per_seed["seed"].to_list()))
    table = _table(f"Arms · {metric}")
    table.add_column("arm", no_wrap=True)
    for s in seeds:
        table.add_column(str(s), justify="right", no_wrap=True)
    table.add_column("mean ± SD", justify="right", no_wrap=True)
    values = {(r["arm"], r["seed"]): r[metric] for r in per_seed.iter_rows(named=True)}
    if baselines is not None and metric in baselines.columns:
        values |= {(r["arm"], r["seed"]): r[metric] for r in baselines.iter_rows(named=True)}
    summary = {r["arm"]: r for r in arms.filter(pl.col("metric") == metric).iter_rows(named=True)}
    for arm in ARMS:
        if arm not in summary:
            continue
        cells = [f"{values[(arm, s)]:.{DIGITS}f}" if (arm, s) in values else "" for s in seeds]
        r = summary[arm]
        table.add_row(arm, *cells, fmt.mean_sd(r["mean"], r["sd"], DIGITS))
    present = [b for b in BASELINES if b in summary]
    if present:
        table.add_section()
    for arm in present:
        r = summary[arm]
        if arm in UNTRAINED_BASELINES:  # no training seed: one value, shown once
            value = Text(f"{r['mean']:.{DIGITS}f}")
            value.append(" (no SD)", style="dim")
            table.add_row(Text(arm, style="cyan"), *("·" for _ in seeds), value)
        else:
            cells = [f"{values[(arm, s)]:.{DIGITS}f}" if (arm, s) in values else "" for s in seeds]
            table.add_row(Text(arm, style="cyan"), *cells, fmt.mean_sd(r["mean"], r["sd"], DIGITS))
    return table


def levels_table(arms: pl.DataFrame, measure: str) -> Table | None:
    """Rows the levels finest first (and the hier score for mAP), columns two groups: the cells, then the
    baselines; each entry the mean over seeds (an untrained baseline's one value). The paper's reading,
    finer levels down and coarser up from a baseline to a cell, is then one row-by-row glance.
    None when the arm table has no baseline."""
    present = set(arms["arm"].to_list())
    cells = [a for a in ARMS if a in present]
    base = [b for b in BASELINES if b in present]
    if not base:
        return None
    rows = [f"{level}_{measure}" for level in LEVELS] + ([HIER_METRIC] if measure == MAP else [])
    means = {(r["arm"], r["metric"]): r["mean"] for r in arms.iter_rows(named=True)}
    table = _table(f"Levels · {measure}: cells │ baselines")
    table.add_column("level", no_wrap=True)
    for a in cells:
        table.add_column(a, justify="right", no_wrap=True)
    table.add_column("│", justify="center", no_wrap=True, style="dim")
    for b in base:
        table.add_column(b, justify="right", no_wrap=True, header_style="bold cyan")
    for metric in rows:
        if not any((a, metric) in means for a in (*cells, *base)):
            continue
        values = [
            f"{means[(a, metric)]:.{DIGITS}f}" if means.get((a, metric)) is not None else "" for a in (*cells, *base)
        ]
        table.add_row(metric.removesuffix(f"_{measure}"), *values[: len(cells)], "│", *values[len(cells) :])
    return table


def effects_table(effects: SimpleEffects, metric: str) -> Table:
    """The simple effects and the interaction: per seed, mean ± SD, and in how many seeds each is > 0."""
    by_name = effects[metric]
    # No effect at all when the cells share no contrast (E_R with H_S only): an empty table, and the
    # view's note says which effects are left out.
    first = next(iter(by_name.values()), None)
    seeds = sorted(first.per_seed) if first is not None else []
    table = _table(f"Simple effects · {metric} (paired by seed)")
    table.add_column("effect", no_wrap=True)
    for s in seeds:
        table.add_column(str(s), justify="right", no_wrap=True)
    table.add_column("mean ± SD", justify="right", no_wrap=True)
    table.add_column(">0", justify="right", no_wrap=True)
    for name, e in by_name.items():
        table.add_row(
            name,
            *(fmt.signed(e.per_seed[s], DIGITS) for s in seeds),
            fmt.mean_sd(e.mean, e.sd, DIGITS, sign=True),
            fmt.seed_count(e.positive_seeds, e.n_seeds),
        )
    return table


def effects_legend() -> Text:
    text = Text()
    for i, (name, definition) in enumerate(SHORT_DEFINITIONS.items()):
        text.append(name, style="bold")
        text.append(f" = {definition}", style="dim")
        text.append("\n" if i == 2 else "   ")
    return text


def redistribution_view(result: Redistribution) -> RenderableType:
    """Per contrast: a bar per level for the mean and for every seed, growing left when H is below E."""
    scale = max(
        (
            abs(v)
            for by_level in result.contrasts.values()
            for e in by_level.values()
            for v in (e.mean, *e.per_seed.values())
        ),
        default=0.0,
    )
    blocks: list[RenderableType] = []
    for contrast, by_level in result.contrasts.items():
        flag = result.pattern[contrast]
        head = Text(f"{SHORT_DEFINITIONS[contrast]} under {CONTRAST_LOSS[contrast]}", style="bold")
        head.append("   finer down, highest up: ", style="dim")
        head.append("yes" if flag else "no", style="bold green" if flag else "dim")
        head.append(f" ({result.seeds_with_pattern[contrast]}/{result.n_seeds} seeds)", style="dim")
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False)
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(justify="right", no_wrap=True)
        for level in LEVELS:
            e = by_level[level]
            table.add_row(
                Text(level, style="bold"),
                "mean",
                fmt.zero_bar(e.mean, scale),
                fmt.mean_sd(e.mean, e.sd, sign=True),
            )
            for seed, value in sorted(e.per_seed.items()):
                table.add_row("", Text(str(seed), style="dim"), fmt.zero_bar(value, scale), fmt.signed(value))
        blocks += [head, table, Text("")]
    blocks.append(
        Text(f"scale: full bar = {scale:.{DIGITS}f} {result.metric}; ◀ H below E · H above E ▶", style="dim")
    )
    return Group(*blocks)
