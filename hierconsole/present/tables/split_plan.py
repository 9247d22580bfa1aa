"""A study's split plan as a `Grid`: each split, its images and where they come from, with notes on what
was carved out of what (the plan `run` prints at its start and `run --dry-run` prints alone)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hierconsole.datasets.splits import HOLDOUT_FRACTION
from hierconsole.plurals import counted
from hierconsole.present import numbers
from hierconsole.present.grid import Column, Grid

if TYPE_CHECKING:
    from hierconsole.config.preset import Preset
    from hierconsole.study.run.drawn_splits import DrawnSplits


@dataclass(frozen=True)
class PlanRow:
    split: str
    images: int
    source: str


def split_plan_grid(drawn: DrawnSplits, preset: Preset, title: str = "split plan") -> Grid:
    grid = Grid(
        title,
        [Column("split", numeric=False), Column("images"), Column("from", numeric=False)],
    )
    rows, notes = plan_rows(drawn, preset)
    for row in rows:
        grid.add_row(row.split, numbers.whole(row.images), row.source)
    for note in notes:
        grid.note(note)
    return grid


def _uses_of_validation(preset: Preset) -> list[str]:
    training = preset.training
    uses = []
    if preset.tuned_geometries:
        uses.append("temperature tuning")
    if training.select_epoch:
        uses.append("epoch selection")
    if training.val_every:
        uses.append(f"the validation curve (every {counted(training.val_every, 'epoch')})")
    return uses


def plan_rows(drawn: DrawnSplits, preset: Preset) -> tuple[list[PlanRow], list[str]]:
    """The plan's rows (split, images, where they come from) and its notes (what was carved, what it is for)."""
    sp = preset.split
    protocol = drawn.protocol
    rows: list[PlanRow] = []
    if sp.protocol == "official":
        for name, idx in protocol.parts.items():
            rows.append(PlanRow(name, len(idx), f"the dataset's official {name} images"))
    else:
        counts = protocol.params["counts"]
        n_groups = sum(counts)
        images = "their official-train images" if sp.images == "official" else "all their images"
        # `{code}_groups` per level, leaf first (whatever the taxonomy's depth and codes): the leaf's is the first.
        leaf_groups = next(v for k, v in protocol.params.items() if k.endswith("_groups"))
        for p, name in enumerate(("train", "val", "test")):
            leaves = leaf_groups[name]
            source = (
                f"{counts[p]} of {counted(n_groups, sp.level + ' group')} ({counted(leaves, 'leaf')}), "
                + ("their official-test images" if sp.images == "official" and name == "test" else images)
            )
            rows.append(PlanRow(name, len(protocol.parts[name]), source))
    tuning = drawn.tuning.parts
    carved = drawn.val is None
    pool = "the hold-out" if carved else "the val part"
    rows.append(
        PlanRow(
            "development",
            len(tuning["fit"]) if preset.training.select_epoch else len(drawn.development),
            "final runs fit: train only (epochs are selected on validation)"
            if preset.training.select_epoch
            else "final runs fit: train" + ("" if carved else " + val"),
        )
    )
    rows.append(
        PlanRow(
            "validation fit",
            len(tuning["fit"]),
            "train minus the hold-out" if carved else "the train part",
        )
    )
    rows.append(PlanRow("validation query", len(tuning["query"]), f"drawn from {pool}"))
    rows.append(PlanRow("validation gallery", len(tuning["gallery"]), f"the rest of {pool}"))
    n_draws = len(drawn.qgs)
    rows.append(PlanRow("test query", preset.evaluation.n_query, f"each of the {n_draws} Q/G draws of test"))
    rows.append(PlanRow("test gallery", len(drawn.test) - preset.evaluation.n_query, "the rest of test"))
    notes: list[str] = []
    uses = _uses_of_validation(preset)
    if carved:
        held = len(tuning["query"]) + len(tuning["gallery"])
        notes.append(
            f"the dataset has no validation part: validation is carved from train, a leaf-stratified "
            f"{HOLDOUT_FRACTION:.0%} hold-out ({counted(held, 'image')} of {len(drawn.train):,})"
            + (
                "; fixed-endpoint final runs still fit all of train, hold-out included"
                if not preset.training.select_epoch
                else ""
            )
        )
    notes.append(f"validation is used for {', '.join(uses)}" if uses else "validation is not used by this study")
    return rows, notes
