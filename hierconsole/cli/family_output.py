"""How families and cross-study contrasts print: the contrast table and the families table."""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hierconsole.study.analysis.contrasts import StudyContrast
from hierconsole.study.read.families import FamilyRow
from hierconsole.styles import STATE_STYLE
from hierconsole.vocabulary import Phase

CONTRAST_PRECISION = 6
"""Contrasts are often ~1e-3, as the within-study effects (paper Tables S10, S11)."""



def _signed(value: float, digits: int) -> Text:
    return Text(f"{value:+.{digits}f}", style="green" if value > 0 else "red" if value < 0 else "")


def contrast_rich_table(contrast: StudyContrast, digits: int) -> Table:
    seeds = sorted({s for r in contrast.rows for s in r.per_seed})
    title = f"{contrast.name + ': ' if contrast.name else ''}{contrast.a} − {contrast.b} ({contrast.metric}, paired by seed)"
    table = Table(title=title, title_justify="left")
    table.add_column("arms", no_wrap=True)
    table.add_column("level", no_wrap=True)
    for s in seeds:
        table.add_column(str(s), justify="right", no_wrap=True)
    table.add_column("mean ± SD", justify="right", no_wrap=True)
    table.add_column("positive", justify="right", no_wrap=True)
    previous = None
    for r in contrast.rows:
        pair = f"{r.arm_a} − {r.arm_b}"
        mean = _signed(r.mean, digits)
        mean.append(" (n=1, no SD)" if r.sd is None else f" ± {r.sd:.{digits}f}")
        k, n = r.positive_seeds, r.n_seeds
        table.add_row(
            pair if pair != previous else "",
            r.level,
            *(_signed(r.per_seed[s], digits) if s in r.per_seed else Text("—", style="dim") for s in seeds),
            mean,
            Text(f"{k}/{n} seeds", style="green" if k == n else "red" if k == 0 else "yellow"),
        )
        previous = pair
    return table


def print_contrast(console: Console, contrast: StudyContrast, digits: int) -> None:
    console.print(contrast_rich_table(contrast, digits))
    dropped = contrast.dropped_text()
    if dropped:
        console.print(f"[yellow]note:[/] {escape(dropped)}", highlight=False)


def families_table(families: Sequence[FamilyRow]) -> Table:
    table = Table(title="families", title_justify="left")
    for col in ("family", "member", "study", "phase", "jobs finished", "overrides"):
        table.add_column(col)
    for f in families:
        table.add_row(
            Text(f"{f.name} ({f.family_id})", style="bold"),
            "",
            "",
            f"{f.complete}/{len(f.members)} complete",
            f"{f.jobs_finished}/{f.jobs}",
            "",
        )
        for m in f.members:
            table.add_row(
                "",
                m.member,
                m.study_id,
                Text(m.phase, "green" if m.phase == Phase.COMPLETE else STATE_STYLE.get(m.phase, "")),
                f"{m.jobs_finished}/{m.jobs}",
                ", ".join(f"{k}={json.dumps(v)}" for k, v in m.overrides.items()),
            )
    return table
