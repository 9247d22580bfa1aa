"""Effects: the arm table and the simple effects of the current study, filling in seed by seed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import polars as pl
from rich.console import Group, RenderableType
from rich.text import Text
from textual import on, work
from textual.containers import ScrollableContainer
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from hierconsole.contract.events import EventKind
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import SimpleEffects, omitted_text, simple_effects
from hierconsole.study.analysis.per_seed import metric_columns
from hierconsole.study.read import (
    StudyProgress,
    aggregations,
    baselines,
    empty_levels,
    evaluated_per_seed,
    study_progress,
)
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.base import ConsoleScreen
from hierconsole.tui.widgets.tables import (
    arm_values_table,
    effects_legend,
    effects_table,
    levels_table,
    natural_width,
)
from hierconsole.vocabulary import (
    BASELINE_LEGEND,
    BASELINE_SEED,
    HIER,
    HIER_LEVELS,
    LEVELS,
    MAP,
    RANKING_METRICS,
    empty_level_note,
)

LEVEL_CHOICES = (HIER, *HIER_LEVELS, LEVELS[0])
"""The hier score first, then the levels it averages, then the leaf (which it leaves out)."""
MEASURES = RANKING_METRICS


def metric_name(level: str, measure: str) -> str:
    """The per-seed column: hier exists for mAP only (mean of middle and high mAP, never the leaf)."""
    return f"{level}_{measure}"


@dataclass(frozen=True)
class Selection:
    level: str = HIER
    measure: str = MAP
    aggregation: str | None = None

    @property
    def metric(self) -> str:
        return metric_name(self.level, self.measure)


def waiting_text(progress: StudyProgress) -> Text:
    text = Text("No official-test metrics yet. ", style="bold")
    text.append(
        f"Phase {progress.phase}: {progress.seeds_trained}/{progress.seeds} seeds trained. Test metrics are "
        "sealed until every final run has finished and the study is locked; effects then appear seed by "
        "seed as the evaluation scores them.",
        style="dim",
    )
    return text


class AnalysisScreen(ConsoleScreen):
    """Shared by effects and redistribution: study, aggregation and metric choices, live reloading."""

    RELOAD_ON = frozenset({"study"})
    RELOAD_ON_EVENTS = frozenset({EventKind.METRICS, EventKind.DONE})

    @dataclass
    class Loaded(Message):
        study_id: str | None
        progress: StudyProgress | None
        per_seed: pl.DataFrame | None
        aggregations: list[str]
        aggregation: str | None
        result: object = None
        empty_levels: tuple[str, ...] = ()
        """Levels without a valid query in the study's splits (left out of its tables, named here)."""

    def __init__(self) -> None:
        super().__init__()
        self.selection = Selection()
        self.aggregations: list[str] = []

    def compose_body(self) -> Iterable[Widget]:
        yield Static(id="selection", classes="selection")
        yield ScrollableContainer(Static(id="content"), id="scroll")

    def reload(self) -> None:
        self.load(self.console_app.study_id, self.selection)

    @work(thread=True, exclusive=True, exit_on_error=False, group="analysis")
    def load(self, study_id: str | None, selection: Selection) -> None:
        if study_id is None:
            self.post_message(self.Loaded(None, None, None, [], None))
            return
        store = self.console_app.store
        progress = study_progress(store, study_id)
        aggs = aggregations(store, study_id)
        agg = selection.aggregation if selection.aggregation in aggs else (aggs[0] if aggs else None)
        per_seed = evaluated_per_seed(store, study_id, agg) if agg else None
        result = self.analyse(per_seed, selection) if per_seed is not None else None
        self.post_message(self.Loaded(study_id, progress, per_seed, aggs, agg, result, empty_levels(store, study_id)))

    def analyse(self, per_seed: pl.DataFrame, selection: Selection) -> object:
        """Domain calls on the worker thread (override)."""
        return None

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        self.aggregations = message.aggregations
        self.selection = Selection(self.selection.level, self.selection.measure, message.aggregation)
        content = self.query_one("#content", Static)
        renderable: RenderableType = Text("")
        self.query_one("#selection", Static).update(self.selection_text(message))
        if message.study_id is None:
            content.update(
                Text("No study yet: launch one from Datasets (d for the demo) or Runs (l).", "dim")
            )
        elif message.per_seed is None:
            assert message.progress is not None  # load sends it with every study
            content.update(waiting_text(message.progress))
        else:
            renderable = self.render_result(message)
            if message.empty_levels:
                notes = Text("\n".join(empty_level_note(level) for level in message.empty_levels), style="yellow")
                renderable = Group(notes, renderable)
            content.update(renderable)
        # A result keeps its natural width and the view scrolls sideways; a message wraps to the view.
        content.styles.width = natural_width(renderable) if message.result is not None else "1fr"

    def selection_text(self, message: Loaded) -> Text:
        text = Text()
        agg = message.aggregation
        if agg is not None:
            text.append("aggregation ", style="dim")
            posthoc = message.progress is not None and message.progress.posthoc.get(agg, False)
            text.append(agg + (" (post hoc)" if posthoc else ""), style="bold yellow" if posthoc else "bold")
            if len(message.aggregations) > 1:
                text.append(f" of {'/'.join(message.aggregations)}", style="dim")
        if message.per_seed is not None:
            seeds = sorted(set(message.per_seed["seed"].to_list()))
            progress = message.progress
            text.append(
                f" · seeds scored {len(seeds)}/{progress.seeds if progress else len(seeds)}", style="dim"
            )
        return text

    def render_result(self, message: Loaded) -> RenderableType:
        return Text("")

    def action_next_aggregation(self) -> None:
        if len(self.aggregations) < 2:
            self.notify(
                "only the registered aggregation is stored; re-score with "
                "`hierconsole rescore STUDY --aggregate macro` to compare",
                title="aggregation",
            )
            return
        i = (
            self.aggregations.index(self.selection.aggregation)
            if self.selection.aggregation in self.aggregations
            else 0
        )
        nxt = self.aggregations[(i + 1) % len(self.aggregations)]
        self.selection = Selection(self.selection.level, self.selection.measure, nxt)
        self.reload()

    def action_next_measure(self) -> None:
        measure = MEASURES[(MEASURES.index(self.selection.measure) + 1) % len(MEASURES)]
        level = self.selection.level
        if measure != MAP and level == HIER:
            level = LEVEL_CHOICES[1]
        self.selection = Selection(level, measure, self.selection.aggregation)
        self.reload()


class EffectsScreen(AnalysisScreen):
    SCOPE = "effects"
    BINDINGS = bindings_for(SCOPE)

    def analyse(self, per_seed: pl.DataFrame, selection: Selection) -> object:
        metric = selection.metric
        if metric not in metric_columns(per_seed):
            return None
        study_id = self.console_app.study_id
        base = None if study_id is None else baselines(self.console_app.store, study_id, selection.aggregation)
        if base is not None:
            # Only the seeds scored so far, so a trained baseline pairs with the cells it is shown beside.
            base = base.filter(pl.col("seed").is_in([BASELINE_SEED, *per_seed["seed"].unique().to_list()]))
        # The level table reads every level of the chosen measure; the arm table the chosen metric.
        levels = [m for m in metric_columns(per_seed) if m.endswith(f"_{selection.measure}")]
        return (
            arm_table(per_seed, [metric], baselines=base),
            simple_effects(per_seed, [metric]),
            base,
            arm_table(per_seed, levels, baselines=base) if base is not None else None,
        )

    def selection_text(self, message: AnalysisScreen.Loaded) -> Text:
        text = Text("metric ", style="dim")
        text.append(self.selection.metric, style="bold")
        text.append(" · ", style="dim")
        text.append_text(super().selection_text(message))
        return text

    def render_result(self, message: AnalysisScreen.Loaded) -> RenderableType:
        if message.result is None:
            return Text(f"metric {self.selection.metric} is not in this study's tables", style="yellow")
        arms, effects, base, by_level = cast(
            tuple[pl.DataFrame, SimpleEffects, pl.DataFrame | None, pl.DataFrame | None], message.result
        )  # what analyse returns
        assert message.per_seed is not None  # a result is only computed from per_seed
        metric = self.selection.metric
        omitted = omitted_text(message.per_seed["arm"].to_list())
        levels = None if by_level is None else levels_table(by_level, self.selection.measure)
        return Group(
            arm_values_table(message.per_seed, arms, metric, base),
            Text(""),
            # The legend one clause a line, so it never widens the view beyond its tables.
            *(() if levels is None else (levels, Text("\n".join(BASELINE_LEGEND.split("; ")), style="dim"), Text(""))),
            effects_table(effects, metric),
            *([Text(omitted, style="yellow")] if omitted else []),
            effects_legend(),
        )

    def action_next_level(self) -> None:
        levels = LEVEL_CHOICES if self.selection.measure == MAP else LEVEL_CHOICES[1:]
        current = self.selection.level if self.selection.level in levels else levels[-1]
        level = levels[(levels.index(current) + 1) % len(levels)]
        self.selection = Selection(level, self.selection.measure, self.selection.aggregation)
        self.reload()
