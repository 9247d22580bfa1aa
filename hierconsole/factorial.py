"""The factorial's arms and effects, each defined once as a paired contrast of arms (paper Eq. 12-13).

A study crosses G geometries with L objectives (the paper's 2 × 2 by default); an arm is the cell
``{geometry code}_{objective code}`` (`H_S`: Poincaré × Taxonomy-SupCon). A :class:`Factorial` is read
off the arms themselves, so a study, an exported table or a file of one's own gives the same effects:

- the geometry contrast of every pair of geometries within each objective (`geom_R` = H_R − E_R),
- the objective contrast of every pair of objectives within each geometry (`loss_E` = E_S − E_R),
- every 2 × 2 interaction contrast ((H_S − E_S) − (H_R − E_R)),
- beyond the paper's 2 × 2, the main effects: each pair of geometries averaged over the objectives
  (`geom:L-E`), each pair of objectives averaged over the geometries (`loss:F-S`),

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

from hierconsole.registry import GEOMETRIES, OBJECTIVES, Component, custom_code_problem
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


@dataclass(frozen=True)
class Average:
    """The mean of contrasts (a main effect: a geometry pair's contrast averaged over the objectives),
    summed in the written order and divided once."""

    terms: tuple[Contrast, ...]

    def value(self, arms: Mapping[str, float]) -> float:
        total = 0.0
        for term in self.terms:
            total += term.value(arms)
        return total / len(self.terms)

    def text(self) -> str:
        return f"mean({', '.join(t.text() for t in self.terms)})"

    @property
    def arms(self) -> frozenset[str]:
        return frozenset().union(*(t.arms for t in self.terms))


EffectDefinition = Contrast | Average
"""What an effect's name stands for: a paired contrast, or the average of some (a main effect)."""


def _term_value(term: str | Contrast, arms: Mapping[str, float]) -> float:
    return term.value(arms) if isinstance(term, Contrast) else arms[term]


def _render(contrast: Contrast, name: Callable[[str], str]) -> str:
    def part(term: str | Contrast) -> str:
        return f"({_render(term, name)})" if isinstance(term, Contrast) else name(term)

    return f"{part(contrast.plus)} - {part(contrast.minus)}"


GEOMETRY_CODES: tuple[str, ...] = tuple(c.code for c in GEOMETRIES.values())
OBJECTIVE_CODES: tuple[str, ...] = tuple(c.code for c in OBJECTIVES.values())


def arm_of(geometry_code: str, objective_code: str) -> str:
    """The arm of a cell: ("H", "S") -> "H_S"."""
    return f"{geometry_code}_{objective_code}"


def arm_codes(arm: str) -> tuple[str, str] | None:
    """(geometry code, objective code) of an arm name, None for a name that is not an arm (a baseline, a
    misspelling): each code a built-in's letter or a code of one's own (`registry.custom_code_problem`)."""
    g, sep, o = arm.partition("_")
    if not sep:
        return None
    if g not in GEOMETRY_CODES and custom_code_problem(g):
        return None
    if o not in OBJECTIVE_CODES and custom_code_problem(o):
        return None
    return g, o


def objective_code(cell: str) -> str:
    """The objective code of a cell of the factorial (`S` of `H_S`); ValueError for a name that is no arm."""
    codes = arm_codes(cell)
    if codes is None:
        raise ValueError(f"{cell!r} is not an arm of a factorial")
    return codes[1]


def _ordered(codes: Iterable[str], builtin: Iterable[str]) -> tuple[str, ...]:
    known = list(builtin)
    given = set(codes)
    return tuple(c for c in known if c in given) + tuple(sorted(given - set(known)))


def _label(code: str, components: Mapping[str, Component]) -> str:
    return next((c.label for c in components.values() if c.code == code), code)


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

    @classmethod
    def spanned(cls, arms: Iterable[str]) -> Factorial:
        """The factorial a study of these arms belongs to: the paper's 2 × 2 when they are among its arms
        (a study of some of its cells names and omits effects as the paper's), else the one they span."""
        arms = list(arms)
        cells = {a for a in arms if arm_codes(a) is not None}
        return PAPER if cells <= set(PAPER.arms) else cls.of_arms(arms)

    @property
    def legend(self) -> str:
        """What the arm codes stand for, as tables and reports print it under the arms (a code of one's own
        stands for its class)."""
        geometries = ", ".join(f"{c} = {_label(c, GEOMETRIES)}" for c in self.geometries)
        objectives = ", ".join(f"{c} = {_label(c, OBJECTIVES)}" for c in self.objectives)
        return f"arms: {geometries} geometry; {objectives} loss"

    @property
    def arms(self) -> tuple[str, ...]:
        """Every cell, objective-major (the paper's E_R, H_R, E_S, H_S)."""
        return tuple(arm_of(g, o) for o in self.objectives for g in self.geometries)

    def order(self, arms: Iterable[str]) -> tuple[str, ...]:
        """`arms` in this factorial's order (those it does not hold left out)."""
        given = set(arms)
        return tuple(a for a in self.arms if a in given)

    @cached_property
    def contrasts(self) -> dict[str, EffectDefinition]:
        """Every simple effect and 2 × 2 interaction, by name, in display order; beyond the paper's 2 × 2
        the main effects follow (each pair of one factor averaged over the other's levels)."""
        out: dict[str, EffectDefinition] = {}
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
        if len(self.geometries) > 2 or len(self.objectives) > 2:
            if len(self.objectives) > 1:
                for a, b in combinations(self.geometries, 2):
                    out[f"geom:{b}-{a}"] = Average(tuple(Contrast(arm_of(b, o), arm_of(a, o)) for o in self.objectives))
            if len(self.geometries) > 1:
                for p, q in combinations(self.objectives, 2):
                    out[f"loss:{q}-{p}"] = Average(tuple(Contrast(arm_of(g, q), arm_of(g, p)) for g in self.geometries))
        return out

    @property
    def effects(self) -> dict[str, str]:
        """name -> definition, e.g. "geom_R" -> "H_R - E_R"."""
        return {name: c.text() for name, c in self.contrasts.items()}

    @property
    def geometry_contrasts(self) -> tuple[str, ...]:
        return tuple(n for n in self.contrasts if is_geometry_contrast(n))

    @property
    def objective_contrasts(self) -> tuple[str, ...]:
        return tuple(n for n in self.contrasts if is_objective_contrast(n))

    @property
    def headline_pairs(self) -> tuple[tuple[str, str], ...]:
        return headline_pairs(self.contrasts)

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


def cells_in_order(arms: Iterable[str]) -> tuple[str, ...]:
    """The factorial's cells among `arms` (baselines left out), in the factorial's order."""
    arms = list(arms)
    return Factorial.of_arms(arms).order(arms)


def arms_in_order(arms: Iterable[str]) -> tuple[str, ...]:
    """`arms` in display order: the cells in the factorial's order, then the baselines in theirs (names
    that are neither left out)."""
    arms = list(arms)
    return (*cells_in_order(arms), *(b for b in BASELINES if b in arms))


def is_geometry_contrast(name: str) -> bool:
    """A geometry contrast within an objective (`geom_R`, `geom_S:L-E`)."""
    return name.startswith("geom_")


def is_objective_contrast(name: str) -> bool:
    """An objective contrast within a geometry (`loss_E`, `loss_H:F-S`)."""
    return name.startswith("loss_")


def headline_pairs(effects: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """|objective contrast| − |geometry contrast|, paired by seed: each objective contrast (within a
    geometry) against each geometry contrast (within an objective) among `effects`, in their order."""
    names = list(effects)
    return tuple(
        (o, g) for o in names if is_objective_contrast(o) for g in names if is_geometry_contrast(g)
    )


def is_baseline_contrast(name: str) -> bool:
    """Whether an effect's name is an arm-against-baseline contrast (`E_S_vs_frozen`)."""
    return "_vs_" in name


def headline_name(loss: str, geometry: str) -> str:
    """``"|loss_E| - |geom_R|"``: the name of one headline comparison."""
    return f"|{loss}| - |{geometry}|"


PAPER = Factorial(("E", "H"), ("R", "S"))
"""The paper's 2 × 2: Euclidean, Poincaré × regression, Taxonomy-SupCon."""

CONTRASTS: dict[str, Contrast] = {n: c for n, c in PAPER.contrasts.items() if isinstance(c, Contrast)}
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
