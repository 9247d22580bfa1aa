"""The factorial's effects, each defined once as a paired contrast of arms (paper Eq. 12-13).

A shared leaf beside `vocabulary`: the analysis computes effects from these definitions, the SQL views
(`study/db/views.py`) render them, and the front ends print their text, so an effect means one thing
everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hierconsole.vocabulary import ARMS, BASELINES


@dataclass(frozen=True)
class Contrast:
    """A paired difference ``plus - minus`` of two arms, or of two contrasts (the interaction).

    The one definition of an effect: its value (evaluated in the written order, so the rounding is that
    of the formula as written), its text and its SQL (the views in `study/db/views.py`) all come from it.
    """

    plus: str | Contrast
    minus: str | Contrast

    def value(self, arms: Mapping[str, float]) -> float:
        return _term_value(self.plus, arms) - _term_value(self.minus, arms)

    def text(self) -> str:
        return _render(self, str)

    def sql(self) -> str:
        """The difference over a row whose columns are the arms (as PIVOT makes them)."""
        return _render(self, lambda arm: f'"{arm}"')

    @property
    def arms(self) -> frozenset[str]:
        return frozenset().union(*(t.arms if isinstance(t, Contrast) else {t} for t in (self.plus, self.minus)))


def _term_value(term: str | Contrast, arms: Mapping[str, float]) -> float:
    return term.value(arms) if isinstance(term, Contrast) else arms[term]


def _render(contrast: Contrast, name: Callable[[str], str]) -> str:
    def part(term: str | Contrast) -> str:
        return f"({_render(term, name)})" if isinstance(term, Contrast) else name(term)

    return f"{part(contrast.plus)} - {part(contrast.minus)}"


CONTRASTS: dict[str, Contrast] = {
    "geom_R": Contrast("H_R", "E_R"),
    "geom_S": Contrast("H_S", "E_S"),
    "loss_E": Contrast("E_S", "E_R"),
    "loss_H": Contrast("H_S", "H_R"),
    "interaction": Contrast(Contrast("H_S", "E_S"), Contrast("H_R", "E_R")),
}
"""Simple effects of paper Eq. (12)-(13) and the interaction, by name, in display order."""

EFFECTS: dict[str, str] = {name: contrast.text() for name, contrast in CONTRASTS.items()}
"""name -> definition, e.g. "geom_R" -> "H_R - E_R"."""

BASELINE_CONTRASTS: dict[str, Contrast] = {
    f"{arm}_vs_{baseline}": Contrast(arm, baseline) for baseline in BASELINES for arm in ARMS
}
"""Each trained arm minus each baseline arm ("E_S_vs_frozen" = E_S - frozen): the baseline has one value
(per metric, perturbations averaged) that every seed of the arm is paired with."""

BASELINE_EFFECTS: dict[str, str] = {name: contrast.text() for name, contrast in BASELINE_CONTRASTS.items()}

REDISTRIBUTION_CONTRASTS: tuple[str, str] = ("geom_S", "geom_R")
"""H_S - E_S (under taxonomy SupCon) first, as in paper §5.4, then H_R - E_R (under regression)."""

HEADLINE_PAIRS: tuple[tuple[str, str], ...] = tuple(
    (loss, geometry) for loss in ("loss_E", "loss_H") for geometry in ("geom_R", "geom_S")
)
"""The paper's headline comparison, |loss effect| - |geometry effect| paired by seed: each objective-family
contrast (within a geometry) against each geometry contrast (within a loss)."""


def headline_name(loss: str, geometry: str) -> str:
    """``"|loss_E| - |geom_R|"``: the name of one headline comparison."""
    return f"|{loss}| - |{geometry}|"
