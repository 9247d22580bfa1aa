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
from hierconsole.errors import HierconsoleError
from hierconsole.levels import WHOLE_TREE, column_of
from hierconsole.locations import report_path
from hierconsole.present.levels import PAPER, level_choices, levels_in_columns
from hierconsole.present.render import minimum_width, render
from hierconsole.present.tables.effects import (
    arm_values_grid,
    baseline_contrasts_grid,
    baseline_names,
    effects_grid,
    effects_legend,
    factorial_names,
    levels_grid,
)
from hierconsole.study.read import (
    StudyProgress,
    aggregations,
    empty_levels,
    evaluated_per_seed,
    study_levels,
    study_progress,
)
from hierconsole.study.read.effects import EffectsView, effects_so_far, whole_tree_columns
from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.base import ConsoleScreen, view_width, while_open
from hierconsole.vocabulary import (
    BASELINE_LEGEND,
    HIER_SCORE,
    MAP,
    RANKING_METRICS,
    aggregation_label,
    empty_level_note,
)

LEVEL_CHOICES = level_choices(PAPER)
"""A three-level study's: the hier score first, then the levels it averages, then the leaf (which it
leaves out). A study of another depth cycles `level_choices` of the levels its tables name."""
MEASURES = RANKING_METRICS


def metric_name(level: str, measure: str) -> str:
    """The per-seed column: hier exists for mAP only (mean of the non-leaf levels' mAP, never the leaf); a
    metric of the whole tree is its own column."""
    return column_of(level, measure)


@dataclass(frozen=True)
class Selection:
    level: str = HIER_SCORE
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
    WHOLE_TREE_MEASURES = False
    """Whether the measure picker goes on to the whole tree's metrics (Effects: yes; Redistribution, which
    reads every level, no)."""

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
        hier: tuple[str, ...] | None = None
        """The levels the study's hier score averages (its recorded plan); None: every level above the leaf."""

    def __init__(self) -> None:
        super().__init__()
        self.selection = Selection()
        self.aggregations: list[str] = []
        self.level_choices: tuple[str, ...] = LEVEL_CHOICES
        """The levels the picker cycles, from the levels the study's tables name (leaf first)."""
        self.measures: tuple[str, ...] = MEASURES
        """The measures the picker cycles: the ranking metrics, then (Effects) the whole tree's the study scores."""
        self._shown: AnalysisScreen.Loaded | None = None

    def laid_out_width(self) -> int:
        """The cells a result may take before it changes form (the view scrolls only past a record's)."""
        return view_width(self.query_one("#scroll", ScrollableContainer), self.size.width)

    def on_resize(self) -> None:
        # A result is laid out for the view's width: a new width may fit a fuller form or need a narrower.
        if self._shown is not None and self._shown.result is not None:
            self._show(self._shown)

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
        hier = study_levels(store, study_id).hier
        self.post_message(
            self.Loaded(study_id, progress, per_seed, aggs, agg, result, empty_levels(store, study_id), hier)
        )

    def analyse(self, per_seed: pl.DataFrame, selection: Selection) -> object:
        """Domain calls on the worker thread (override)."""
        return None

    @on(Loaded)
    @while_open
    def _loaded(self, message: Loaded) -> None:
        self.aggregations = message.aggregations
        level = self.selection.level
        if message.per_seed is not None:
            levels = levels_in_columns(message.per_seed.columns)
            hier = None if message.hier is None else tuple(c for c in message.hier if c in levels.codes)
            self.level_choices = level_choices(levels, hier or None)
            if self.WHOLE_TREE_MEASURES:
                self.measures = MEASURES + whole_tree_columns(message.per_seed)
            if level not in self.level_choices and not (level == WHOLE_TREE and self.selection.measure in self.measures):
                level = self.level_choices[0]  # a level of the study shown before
        measure = self.selection.measure if self.selection.measure in self.measures else MAP
        if measure == MAP and level == WHOLE_TREE:
            level = self.level_choices[0]
        self.selection = Selection(level, measure, message.aggregation)
        self._shown = message
        self._show(message)

    def _show(self, message: Loaded) -> None:
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
            renderable = self.render_result(message, self.laid_out_width())
            if message.empty_levels:
                notes = Text(
                    "\n".join(empty_level_note(level) for level in message.empty_levels), style="yellow"
                )
                renderable = Group(notes, renderable)
            content.update(renderable)
        # A result is laid out for the view's width; only what cannot be narrower (a record's longest
        # value) makes the view scroll sideways. A message wraps.
        view = self.laid_out_width()
        content.styles.width = max(view, minimum_width(renderable)) if message.result is not None else "1fr"

    def selection_text(self, message: Loaded) -> Text:
        text = Text()
        agg = message.aggregation
        if agg is not None:
            text.append("aggregation ", style="dim")
            posthoc = message.progress is not None and message.progress.posthoc.get(agg, False)
            text.append(aggregation_label(agg, posthoc), style="bold yellow" if posthoc else "bold")
            if len(message.aggregations) > 1:
                text.append(f" of {'/'.join(message.aggregations)}", style="dim")
        if message.per_seed is not None:
            seeds = sorted(set(message.per_seed["seed"].to_list()))
            progress = message.progress
            text.append(
                f" · seeds scored {len(seeds)}/{progress.seeds if progress else len(seeds)}", style="dim"
            )
        return text

    def render_result(self, message: Loaded, width: int) -> RenderableType:
        """The result laid out for `width` cells (override)."""
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
        measures = self.measures if self.selection.measure in self.measures else MEASURES
        measure = measures[(measures.index(self.selection.measure) + 1) % len(measures)]
        level = self.selection.level
        if measure not in MEASURES:  # a metric of the whole tree: it has no level
            level = WHOLE_TREE
        elif level == WHOLE_TREE:
            level = self.level_choices[0] if measure == MAP else self.level_choices[1]
        elif measure != MAP and level == HIER_SCORE:
            level = self.level_choices[1]
        self.selection = Selection(level, measure, self.selection.aggregation)
        self.reload()


class EffectsScreen(AnalysisScreen):
    SCOPE = "effects"
    WHOLE_TREE_MEASURES = True
    BINDINGS = bindings_for(SCOPE)

    def analyse(self, per_seed: pl.DataFrame, selection: Selection) -> object:
        # The same view as `hierconsole effects` (arms, effects, cells against baselines, omissions); the
        # level table reads every level of the chosen measure.
        return effects_so_far(
            self.console_app.store,
            self.console_app.study_id,
            per_seed,
            selection.metric,
            selection.measure,
            selection.aggregation,
        )

    def selection_text(self, message: AnalysisScreen.Loaded) -> Text:
        text = Text("metric ", style="dim")
        text.append(self.selection.metric, style="bold")
        text.append(" · ", style="dim")
        text.append_text(super().selection_text(message))
        return text

    def render_result(self, message: AnalysisScreen.Loaded, width: int) -> RenderableType:
        if message.result is None:
            return Text(f"metric {self.selection.metric} is not in this study's tables", style="yellow")
        view, by_level = cast(tuple[EffectsView, pl.DataFrame | None], message.result)  # what analyse returns
        metric = self.selection.metric
        parts: list[RenderableType] = [
            *render(
                arm_values_grid(view.per_seed, view.arms, metric, ARM_DIGITS, view.baselines),
                width,
                boxed=False,
            ),
            Text(""),
        ]
        levels = (
            None
            if by_level is None
            else levels_grid(
                by_level,
                self.selection.measure,
                ARM_DIGITS,
                levels_in_columns(() if message.per_seed is None else message.per_seed.columns),
            )
        )
        if levels is not None:
            # The legend one clause a line, so it never widens the view beyond its tables.
            parts += [
                *render(levels, width, boxed=False),
                Text("\n".join(BASELINE_LEGEND.split("; ")), style="dim"),
                Text(""),
            ]
        if factorial_names(view.effects):
            parts += [*render(effects_grid(view.effects, EFFECT_DIGITS), width, boxed=False), Text("")]
        if baseline_names(view.baseline_contrasts):
            parts += [
                *render(baseline_contrasts_grid(view.baseline_contrasts, EFFECT_DIGITS), width, boxed=False),
                Text(""),
            ]
        if view.omitted:
            parts.append(Text(view.omitted, style="yellow"))
        parts += effects_legend(view.effects)
        return Group(*parts)

    def action_write_report(self) -> None:
        study_id = self.console_app.study_id
        if study_id is None:
            self.notify("no study to report on yet", title="report", severity="warning")
            return
        self.notify(f"writing the report of {study_id}…", title="report")
        self.write_report(study_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="report")
    def write_report(self, study_id: str) -> None:
        # The same document as `hierconsole report STUDY`, rewritten each time from the store (it holds
        # nothing the store does not), into the home so the console never asks where.
        from hierconsole.present.report.figures import require_matplotlib
        from hierconsole.present.report.output import document_for, write_document
        from hierconsole.study.read.report_inputs import inputs_for

        store = self.console_app.store
        target = report_path(store.home, study_id)
        try:
            require_matplotlib()
            target.parent.mkdir(exist_ok=True)
            path = write_document(document_for(inputs_for(store, study_id)), target, force=True)
        except (HierconsoleError, OSError) as exc:
            self.app.call_from_thread(self.notify, str(exc), title="report", severity="error", timeout=10)
            return
        self.app.call_from_thread(self.notify, f"wrote the report to {path}", title="report", timeout=15)

    def action_next_level(self) -> None:
        if self.selection.level == WHOLE_TREE:
            self.notify(f"{self.selection.measure} is a metric of the whole tree: it has no levels", title="level")
            return
        levels = self.level_choices if self.selection.measure == MAP else self.level_choices[1:]
        current = self.selection.level if self.selection.level in levels else levels[-1]
        level = levels[(levels.index(current) + 1) % len(levels)]
        self.selection = Selection(level, self.selection.measure, self.selection.aggregation)
        self.reload()
