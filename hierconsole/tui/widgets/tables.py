"""Rich renderables of analysis results for the effects and redistribution views.

Presentation only: every number comes from `hierconsole.study.effects` (arm table, simple effects,
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

from hierconsole.study.effects import EFFECTS, Redistribution, SimpleEffects
from hierconsole.tui import format as fmt
from hierconsole.vocabulary import ARMS, LEVELS

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


def arm_values_table(per_seed: pl.DataFrame, arms: pl.DataFrame, metric: str) -> Table:
    """Per arm: the per-seed values of `metric`, then mean ± SD from the arm table."""
    seeds = sorted(set(per_seed["seed"].to_list()))
    table = _table(f"Arms · {metric}")
    table.add_column("arm", no_wrap=True)
    for s in seeds:
        table.add_column(str(s), justify="right", no_wrap=True)
    table.add_column("mean ± SD", justify="right", no_wrap=True)
    values = {(r["arm"], r["seed"]): r[metric] for r in per_seed.iter_rows(named=True)}
    summary = {r["arm"]: r for r in arms.filter(pl.col("metric") == metric).iter_rows(named=True)}
    for arm in ARMS:
        if arm not in summary:
            continue
        cells = [f"{values[(arm, s)]:.{DIGITS}f}" if (arm, s) in values else "" for s in seeds]
        r = summary[arm]
        table.add_row(arm, *cells, fmt.mean_sd(r["mean"], r["sd"], DIGITS))
    return table


def effects_table(effects: SimpleEffects, metric: str) -> Table:
    """The simple effects and the interaction: per seed, mean ± SD, and in how many seeds each is > 0."""
    by_name = effects[metric]
    seeds = sorted(next(iter(by_name.values())).per_seed)
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
