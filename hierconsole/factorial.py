"""The factorial's arms and effects, each defined once as a paired contrast of arms (paper Eq. 12-13).

A study crosses G geometries with L objectives (the paper's 2 × 2 by default); an arm is the cell
``{geometry code}_{objective code}`` (`H_S`: Poincaré × Taxonomy-SupCon). A :class:`Factorial` is read
off the arms themselves, so a study, an exported table or a file of one's own gives the same effects:

- the geometry contrast of every pair of geometries within each objective (`geom_R` = H_R − E_R),
- the objective contrast of every pair of objectives within each geometry (`loss_E` = E_S − E_R),
- every 2 × 2 interaction contrast ((H_S − E_S) − (H_R − E_R)),

the later factor level minus the earlier in the components' order (built-ins in registry order, then
one's own by code). A factor of two levels keeps the paper's short names (`geom_R`, `loss_E`,
`interaction`); with more, a name says its pair (`geom_R:L-E`, `loss_E:S-R`, `interaction:L-E:S-R`).

A shared leaf beside `vocabulary`: the analysis computes effects from these definitions, the SQL views
(`study/db/views.py`) render the paper's, and the front ends print their text, so an effect means one
thing everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

from hierconsole.registry import GEOMETRIES, OBJECTIVES
from hierconsole.vocabulary import BASELINES


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


def arm_of(geometry_code: str, objective_code: str) -> str:
    """The arm of a cell: ("H", "S") -> "H_S"."""
    return f"{geometry_code}_{objective_code}"


def arm_codes(arm: str) -> tuple[str, str] | None:
    """(geometry code, objective code) of an arm name, None for a name that is not an arm (a baseline)."""
    g, sep, o = arm.partition("_")
    if not sep or not g or not o or "_" in o or not g.isidentifier() or not o.isidentifier():
        return None
    return g, o


def _ordered(codes: Iterable[str], builtin: Iterable[str]) -> tuple[str, ...]:
    known = list(builtin)
    given = set(codes)
    return tuple(c for c in known if c in given) + tuple(sorted(given - set(known)))


GEOMETRY_CODES: tuple[str, ...] = tuple(c.code for c in GEOMETRIES.values())
OBJECTIVE_CODES: tuple[str, ...] = tuple(c.code for c in OBJECTIVES.values())


@dataclass(frozen=True)
class Factorial:
    """G geometries × L objectives by their arm codes, each factor in the components' order."""

    geometries: tuple[str, ...]
    objectives: tuple[str, ...]

    @classmethod
    def of_arms(cls, arms: Iterable[str]) -> Factorial:
        """The factorial the arms span (names that are not arms, such as baselines, are left out)."""
        parts = [p for p in map(arm_codes, arms) if p is not None]
        return cls(
            _ordered((g for g, _ in parts), GEOMETRY_CODES),
            _ordered((o for _, o in parts), OBJECTIVE_CODES),
        )

    @property
    def arms(self) -> tuple[str, ...]:
        """Every cell, objective-major (the paper's E_R, H_R, E_S, H_S)."""
        return tuple(arm_of(g, o) for o in self.objectives for g in self.geometries)

    def order(self, arms: Iterable[str]) -> tuple[str, ...]:
        """`arms` in this factorial's order (those it does not hold left out)."""
        given = set(arms)
        return tuple(a for a in self.arms if a in given)

    @cached_property
    def contrasts(self) -> dict[str, Contrast]:
        """Every simple effect and 2 × 2 interaction, by name, in display order."""
        out: dict[str, Contrast] = {}
        two_g, two_o = len(self.geometries) == 2, len(self.objectives) == 2
        for o in self.objectives:
            for a, b in combinations(self.geometries, 2):
                out[f"geom_{o}" if two_g else f"geom_{o}:{b}-{a}"] = Contrast(arm_of(b, o), arm_of(a, o))
        for g in self.geometries:
            for p, q in combinations(self.objectives, 2):
                out[f"loss_{g}" if two_o else f"loss_{g}:{q}-{p}"] = Contrast(arm_of(g, q), arm_of(g, p))
        for a, b in combinations(self.geometries, 2):
            for p, q in combinations(self.objectives, 2):
                name = "interaction" if two_g and two_o else f"interaction:{b}-{a}:{q}-{p}"
                out[name] = Contrast(
                    Contrast(arm_of(b, q), arm_of(a, q)), Contrast(arm_of(b, p), arm_of(a, p))
                )
        return out

    @property
    def effects(self) -> dict[str, str]:
        """name -> definition, e.g. "geom_R" -> "H_R - E_R"."""
        return {name: c.text() for name, c in self.contrasts.items()}

    @property
    def geometry_contrasts(self) -> tuple[str, ...]:
        return tuple(n for n in self.contrasts if n.startswith("geom_"))

    @property
    def objective_contrasts(self) -> tuple[str, ...]:
        return tuple(n for n in self.contrasts if n.startswith("loss_"))

    @property
    def headline_pairs(self) -> tuple[tuple[str, str], ...]:
        """|objective contrast| − |geometry contrast|, paired by seed: each objective contrast (within a
        geometry) against each geometry contrast (within an objective)."""
        return tuple((o, g) for o in self.objective_contrasts for g in self.geometry_contrasts)

    @property
    def redistribution_contrasts(self) -> tuple[str, ...]:
        """The geometry contrasts whose per-level shifts redistribution reads: those under
        Taxonomy-SupCon first (paper §5.4: H_S − E_S, then H_R − E_R), then the rest in order."""
        supcon = OBJECTIVES["supcon"].code
        first = [n for n in self.geometry_contrasts if n.removeprefix("geom_").partition(":")[0] == supcon]
        return (*first, *(n for n in self.geometry_contrasts if n not in first))

    def baseline_contrasts(self) -> dict[str, Contrast]:
        """Each arm minus each baseline arm ("E_S_vs_frozen" = E_S - frozen)."""
        return {f"{arm}_vs_{b}": Contrast(arm, b) for b in BASELINES for arm in self.arms}


PAPER = Factorial(("E", "H"), ("R", "S"))
"""The paper's 2 × 2: Euclidean, Poincaré × regression, Taxonomy-SupCon."""

CONTRASTS: dict[str, Contrast] = PAPER.contrasts
"""Simple effects of paper Eq. (12)-(13) and the interaction, by name, in display order: what the SQL
views render (a study of another factorial has its effects from Python alone)."""

EFFECTS: dict[str, str] = PAPER.effects

BASELINE_CONTRASTS: dict[str, Contrast] = PAPER.baseline_contrasts()
"""Each trained arm minus each baseline arm ("E_S_vs_frozen" = E_S - frozen): the baseline has one value
(per metric, perturbations averaged) that every seed of the arm is paired with."""

BASELINE_EFFECTS: dict[str, str] = {name: contrast.text() for name, contrast in BASELINE_CONTRASTS.items()}

REDISTRIBUTION_CONTRASTS: tuple[str, ...] = PAPER.redistribution_contrasts
"""H_S - E_S (under taxonomy SupCon) first, as in paper §5.4, then H_R - E_R (under regression)."""

HEADLINE_PAIRS: tuple[tuple[str, str], ...] = PAPER.headline_pairs
"""The paper's headline comparison, |loss effect| - |geometry effect| paired by seed: each objective-family
contrast (within a geometry) against each geometry contrast (within a loss)."""


def is_baseline_contrast(name: str) -> bool:
    """Whether an effect's name is an arm-against-baseline contrast (`E_S_vs_frozen`)."""
    return "_vs_" in name


def headline_name(loss: str, geometry: str) -> str:
    """``"|loss_E| - |geom_R|"``: the name of one headline comparison."""
    return f"|{loss}| - |{geometry}|"
