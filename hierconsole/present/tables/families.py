"""Families, cross-study contrasts, a family's pooled effects and an outer-split family's arms and gains
as `Grid`s."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from rich.text import Text

from hierconsole.present import numbers
from hierconsole.present.grid import Column, Grid
from hierconsole.present.tables.effects import PER_SEED
from hierconsole.present.tables.evidence import Shown, summary_cells, summary_columns
from hierconsole.study.analysis.contrasts import StudyContrast, contrast_caption
from hierconsole.study.analysis.outer_arms import UNIT, OuterArmsView
from hierconsole.study.analysis.pooled import PooledEffect
from hierconsole.study.read.families import FamilyRow


def contrast_grid(contrast: StudyContrast, digits: int) -> Grid:
    """A − B per arm pair and level, paired by seed, with intervals and tests; a seed one study lacks
    shows as NO_VALUE (and the note under the table names it)."""
    seeds = sorted({s for r in contrast.rows for s in r.per_unit})
    shown = Shown.of(contrast.rows)
    name = f"{contrast.name}: " if contrast.name else ""
    grid = Grid(
        f"{name}{contrast.a} − {contrast.b} ({contrast_caption(contrast.metric)}, paired by seed)",
        [
            Column("arms", numeric=False),
            Column("level", numeric=False),
            *(Column(str(s), group=PER_SEED, record_header=f"seed {s}") for s in seeds),
            *summary_columns("seed", shown),
        ],
        key_columns=2,
    )
    previous = None
    for i, r in enumerate(contrast.rows):
        pair = f"{r.arm_a} − {r.arm_b}"
        if previous is not None and pair != previous:
            grid.section_ends.add(i - 1)
        grid.add_row(
            pair if pair != previous else "",
            r.level,
            *(numbers.signed(r.per_unit.get(s), digits) for s in seeds),
            *summary_cells(r, digits, shown),
        )
        previous = pair
    dropped = contrast.dropped_text()
    if dropped:
        grid.note(Text(f"note: {dropped}", style="yellow"))
    return grid


def pooled_effects_grid(title: str, members: Sequence[str], pooled: Mapping[str, PooledEffect], digits: int) -> Grid:
    """Each member's effect (the mean over its seeds), then mean ± SD over members with the member as the
    unit, as the paper reads its outer splits."""
    shown = Shown.of(pooled.values())
    grid = Grid(
        title,
        [
            Column("effect", numeric=False),
            Column("definition", numeric=False, droppable=True, style="dim"),
            *(Column(m, group="per member", record_header=f"member {m}") for m in members),
            *summary_columns("member", shown),
        ],
    )
    for name, e in pooled.items():
        grid.add_row(
            name,
            e.definition,
            *(numbers.signed(e.per_unit.get(m), digits) for m in members),
            *summary_cells(e, digits, shown),
        )
    grid.note("seeds to resolve counts members here: the member is the unit")
    return grid


def families_grid(families: Sequence[FamilyRow]) -> Grid:
    """Each family, then its members with their study ids whole (what `contrast A B` takes)."""
    grid = Grid(
        "families",
        [
            Column("family", numeric=False),
            Column("member", numeric=False),
            Column("study", numeric=False),
            Column("phase", numeric=False),
            Column("jobs finished"),
            Column("overrides", numeric=False),
        ],
        key_columns=2,
    )
    for f in families:
        grid.add_row(
            Text(f"{f.name} ({f.family_id})", style="bold"),
            "",
            "",
            f"{f.complete}/{len(f.members)} complete",
            f"{f.jobs_finished}/{f.jobs}",
            "",
        )
        for m in f.members:
            grid.add_row(
                "",
                m.member,
                m.study_id,
                numbers.phase(m.phase),
                f"{m.jobs_finished}/{m.jobs}",
                ", ".join(f"{k}={json.dumps(v)}" for k, v in m.overrides.items()),
            )
        grid.end_section()
    return grid


PER_SPLIT = "per outer split"


def _omitted_note(grid: Grid, view: OuterArmsView) -> None:
    if view.omitted:
        grid.note(
            Text(f"note: {', '.join(view.omitted)} left out: some arm on some split has no value (no valid queries)", style="yellow")
        )


def outer_arms_grid(view: OuterArmsView, digits: int) -> Grid:
    """Each arm's value on every outer split (its mean over the split's training seeds), then mean ± SD
    over splits, per metric: the split is the unit."""
    grid = Grid(
        f"{view.family}: arms per {UNIT} (mean over its seeds), mean ± SD over splits",
        [
            Column("arm", numeric=False),
            Column("metric", numeric=False),
            Column("trains", numeric=False, droppable=True, style="dim"),
            *(Column(s, group=PER_SPLIT, record_header=f"split {s}") for s in view.splits),
            Column("mean ± SD"),
        ],
        key_columns=2,
    )
    previous = None
    for a in view.arms:
        if previous is not None and a.name != previous:
            grid.end_section()
        where = a.arm if a.configuration is None else f"{a.arm} ({a.configuration})"
        grid.add_row(
            a.label if a.name != previous else "",
            a.metric,
            where if a.name != previous else "",
            *(numbers.plain(a.per_unit[s], digits) for s in view.splits),
            numbers.mean_sd(a.mean, a.sd, digits),
        )
        previous = a.name
    grid.note(f"the {UNIT} is the unit: SD over {len(view.splits)} splits; a baseline has one value per split")
    _omitted_note(grid, view)
    return grid


def outer_gains_grid(view: OuterArmsView, digits: int) -> Grid:
    """Each declared gain A − B on every outer split, then mean ± SD over splits and the positive splits."""
    grid = Grid(
        f"{view.family}: paired gains per {UNIT}",
        [
            Column("gain", numeric=False),
            Column("metric", numeric=False),
            *(Column(s, group=PER_SPLIT, record_header=f"split {s}") for s in view.splits),
            *summary_columns("split"),
        ],
        key_columns=2,
    )
    previous = None
    for g in view.gains:
        if previous is not None and g.name != previous:
            grid.end_section()
        grid.add_row(
            g.name if g.name != previous else "",
            g.metric,
            *(numbers.signed(g.per_unit[s], digits) for s in view.splits),
            *summary_cells(g, digits),
        )
        previous = g.name
    grid.note("paired by split (the same split's A and B); seeds to resolve counts splits here")
    _omitted_note(grid, view)
    return grid
