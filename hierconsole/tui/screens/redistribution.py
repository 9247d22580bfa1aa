"""Redistribution: H − E at each level under each loss, per seed and mean, bars coloured by sign."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text

from hierconsole.present.render import render
from hierconsole.present.tables.effects import redistribution_bars_grid
from hierconsole.study.read.effects import Redistribution, redistribution_so_far
from hierconsole.styles import EFFECT_DIGITS
from hierconsole.tui.actions import bindings_for
from hierconsole.tui.screens.effects import AnalysisScreen, Selection

if TYPE_CHECKING:
    import polars as pl


class RedistributionScreen(AnalysisScreen):
    SCOPE = "redistribution"
    BINDINGS = bindings_for(SCOPE)

    def __init__(self) -> None:
        super().__init__()
        self.selection = Selection(level="leaf")

    def analyse(self, per_seed: pl.DataFrame, selection: Selection) -> object:
        return redistribution_so_far(per_seed, selection.measure)

    def selection_text(self, message: AnalysisScreen.Loaded) -> Text:
        text = Text("metric ", style="dim")
        text.append(self.selection.measure, style="bold")
        text.append(" per level · ", style="dim")
        text.append_text(super().selection_text(message))
        return text

    def render_result(self, message: AnalysisScreen.Loaded, width: int) -> RenderableType:
        if message.result is None:
            return Text(
                f"{self.selection.measure} is not stored at every level for this study", style="yellow"
            )
        if isinstance(message.result, str):  # the study lacks the arms of both contrasts
            return Text(message.result, style="yellow")
        assert isinstance(message.result, Redistribution)  # what analyse returns
        return Group(*render(redistribution_bars_grid(message.result, EFFECT_DIGITS), width, boxed=False))
