"""The store's lists — studies, jobs, datasets — and a study's audits and selected epochs as `Grid`s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text

from hierconsole.present import numbers
from hierconsole.present.grid import Column, Grid
from hierconsole.present.levels import dataset_level_counts, span

if TYPE_CHECKING:  # the rows' types only: `runs` and `studies` need not import the audits or datasets
    from hierconsole.study.analysis.audits.result import Check
    from hierconsole.study.read.datasets import DatasetInfo
    from hierconsole.study.read.jobs import JobRow
    from hierconsole.study.read.studies import StudyRow


def studies_grid(studies: Sequence[StudyRow]) -> Grid:
    grid = Grid(
        "studies",
        [
            Column("study", numeric=False),
            Column("name", numeric=False, droppable=True),
            Column("dataset", numeric=False),
            Column("phase", numeric=False),
            Column("jobs finished"),
            Column("created", numeric=False),
        ],
    )
    for s in studies:
        grid.add_row(
            s.study_id,
            s.name,
            s.dataset_id,
            numbers.phase(s.phase),
            f"{s.jobs_finished}/{s.jobs}",
            s.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
    return grid


def runs_grid(jobs: Sequence[JobRow], title: str, *, short: bool = False) -> Grid:
    """Every job with its progress and, when it failed, the last line of its error. `short`: one study's
    jobs by their ids within it, which name their kind and seed (so a narrow form may leave those out)."""
    grid = Grid(
        title,
        [
            Column("job", numeric=False),
            Column("kind", numeric=False, droppable=short),
            Column("seed", droppable=short),
            Column("cells", numeric=False),
            Column("state", numeric=False),
            Column("progress"),
            Column("tries"),
            Column("where", numeric=False),
            Column("error", numeric=False, droppable=True, spill=True),
        ],
    )
    for job in jobs:
        error = job.error.strip().splitlines() if job.error else []
        grid.add_row(
            job.short_id if short else job.job_id,
            job.kind,
            str(job.seed),
            job.cells_text,
            numbers.state(job.shown_state),
            f"{job.done}/{job.total}",
            str(job.attempts),
            job.where,
            error[-1] if error else "",
        )
    return grid


def selection_grid(rows: Sequence[dict], score: str, digits: int = numbers.ARM_DIGITS) -> Grid:
    """The duration frozen per arm from the seed-mean development validation score, before the test was
    read; every seed of the arm is scored at that epoch."""
    grid = Grid(
        f"durations frozen per arm on validation ({score}, mean over seeds)",
        [Column("arm", numeric=False), Column("epoch"), Column("seeds"), Column(f"validation {score}")],
    )
    for r in rows:
        grid.add_row(r["arm"], str(r["epoch"]), str(r["seeds"]), numbers.plain(r["score"], digits))
    return grid


def audit_result(ok: bool | None) -> Text:
    return Text("pending", "yellow") if ok is None else Text("pass", "green") if ok else Text("FAIL", "bold white on red")


def audits_grid(checks: Sequence[Check]) -> Grid:
    """Each audit, its result and its evidence (wrapped, never cut)."""
    grid = Grid("audits", [Column("check", numeric=False), Column("result", numeric=False), Column("evidence", numeric=False, foldable=True)])
    for c in checks:
        grid.add_row(c.name, audit_result(c.ok), c.evidence)
    return grid


def datasets_grid(datasets: Sequence[DatasetInfo]) -> Grid:
    """One row per dataset. Three levels show their names and group counts in full (`leaf/middle/high`);
    a deeper tree shows `K · leaf→top` (its depth, then its leaf's and top's names or counts), which
    keeps the table's width whatever the depth (the console's detail pane names every level)."""
    deep = any(len(d.level_names) != 3 for d in datasets)
    grid = Grid(
        "datasets",
        [
            Column("dataset", numeric=False),
            Column("kind", numeric=False),
            Column("samples"),
            Column("dim"),
            Column("levels", numeric=False),
            Column("groups per level" if deep else "leaf/middle/high"),
            Column("train/val/test"),
            Column("sha256", numeric=False, droppable=True),
        ],
    )
    for d in datasets:
        counts = dataset_level_counts(d)
        names, numbers_ = list(d.level_names), [str(c) for c in counts]
        grid.add_row(
            d.dataset_id,
            d.kind,
            f"{d.n_samples:,}",
            str(d.dim),
            span(names) if len(names) <= 3 else f"{len(names)} · {span(names)}",
            span(numbers_) if len(counts) <= 3 else f"{len(counts)} · {span(numbers_)}",
            f"{d.n_train}/{d.n_val}/{d.n_test}",
            d.sha256[:12],
        )
    return grid
