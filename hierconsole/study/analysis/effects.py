"""Protocol simple effects and the interaction (paper §3.4, §5.2-5.3), paired within the training seed.

Every effect is a difference of arms *paired within a seed* (definitions in `hierconsole.factorial`),
then summarised across seeds as a :class:`~hierconsole.study.analysis.paired.PairedSummary`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import polars as pl

from hierconsole.errors import InputError
from hierconsole.factorial import Factorial, is_baseline_contrast
from hierconsole.study.analysis.paired import PairedSummary
from hierconsole.study.analysis.per_seed import (
    DEFAULT_SOURCE,
    arms_present,
    baseline_values,
    indexed_cells,
    metric_columns,
)
from hierconsole.study.analysis.statistics import Adjusted, adjusted, p_signflip
from hierconsole.vocabulary import BASELINE_SEED, MAP


@dataclass(frozen=True, kw_only=True)
class Effect(PairedSummary[int]):
    """One contrast of one metric across paired seeds (`per_unit`: seed -> value)."""

    metric: str
    name: str
    definition: str
    """The contrast it measures, as arms (`H_R - E_R`): a name like `geom_R` means the pair of geometries
    the study crosses, so the definition travels with the value."""


SimpleEffects = dict[str, dict[str, Effect]]
"""metric -> effect name (in the factorial's contrast order) -> :class:`Effect`."""


def omitted_effects(arms: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Effects of the factorial the arms span that need an arm absent from them: name -> the missing arms
    (a study training a subset of the cells has no value for them, which is not the same as a zero)."""
    present = set(arms)
    factorial = Factorial.spanned(present)
    return {
        name: tuple(a for a in factorial.arms if a in contrast.arms and a not in present)
        for name, contrast in factorial.contrasts.items()
        if not contrast.arms <= present
    }


def omitted_text(arms: Iterable[str]) -> str | None:
    """One line saying which effects are left out and why; None when every effect is computable."""
    arms = list(arms)
    omitted = omitted_effects(arms)
    if not omitted:
        return None
    definitions = Factorial.spanned(arms).effects
    parts = [f"{name} ({definitions[name]}) needs {', '.join(missing)}" for name, missing in omitted.items()]
    return f"not computed, the study trains only {', '.join(arms_present(arms))}: " + "; ".join(parts)


def _paired_seeds(cells: Mapping[tuple[str, int], object], source: str) -> list[int]:
    """Seeds of the table; every seed must hold every arm the table holds (any subset of the four)."""
    seeds = sorted({seed for _, seed in cells})
    present = arms_present(a for a, _ in cells)
    problems = []
    for seed in seeds:
        lacking = [a for a in present if (a, seed) not in cells]
        if lacking:
            have = [a for a in present if (a, seed) in cells]
            problems.append(
                f"seed {seed} lacks arm(s) {', '.join(lacking)} (present: {', '.join(have)}); "
                "effects compare arms within a seed"
            )
    if problems:
        raise InputError(
            source, problems, hint="supply the same arms for every seed, or drop incomplete seeds"
        )
    return seeds


def simple_effects(
    per_seed: pl.DataFrame,
    metrics: Sequence[str] | str | None = None,
    *,
    source: str = DEFAULT_SOURCE,
    baselines: pl.DataFrame | None = None,
    sesoi: float | None = None,
) -> SimpleEffects:
    """Paired simple effects and the interaction (paper Eq. 12-13) of `metrics` (default: every metric
    column), each contrast against a baseline too (see :func:`paired_effects`), with the sign-flip p of
    the mAP effects adjusted over their whole family (:func:`family_adjustments`: every level's mAP, whichever
    `metrics` were asked for) and, with a ``sesoi``, every effect's TOST and verdict against it."""
    chosen = paired_effects(per_seed, metrics, source=source, baselines=baselines, sesoi=sesoi)
    members = [m for m in metric_columns(per_seed) if in_primary_family(m)]
    missing = [m for m in members if m not in chosen]
    family = {m: chosen[m] for m in members if m in chosen}
    if missing:
        family |= paired_effects(per_seed, missing, source=source, baselines=baselines)
    return with_adjustments(chosen, family_adjustments(family))


def paired_effects(
    per_seed: pl.DataFrame,
    metrics: Sequence[str] | str | None = None,
    *,
    source: str = DEFAULT_SOURCE,
    baselines: pl.DataFrame | None = None,
    sesoi: float | None = None,
) -> SimpleEffects:
    """Paired simple effects and the interaction (paper Eq. 12-13) for every metric.

    Each seed must hold the same arms, each exactly once; the effect is computed within the seed, then
    summarised across seeds (mean, sample SD, number of seeds where it is > 0). An effect needing an arm
    the table lacks is left out (see :func:`omitted_effects`), never filled in. With ``baselines``
    (:func:`baselines_from_long`), each arm minus each baseline (:data:`BASELINE_CONTRASTS`) follows,
    every seed paired with an untrained baseline's one value, or with a trained baseline's run of the same
    seed (a contrast against a trained baseline lacking one of the seeds is left out). With a ``sesoi``,
    every effect carries its TOST and verdict against it. No multiplicity adjustment: see
    :func:`simple_effects`.
    """
    names, cells = indexed_cells(per_seed, metrics, source)
    seeds = _paired_seeds(cells, source)
    present = arms_present(a for a, _ in cells)
    # A baseline pairs with every seed: through its one value (untrained) or its own run of that seed.
    base: dict[str, dict[int, dict[str, float]]] = {}
    for arm, by_seed in baseline_values(baselines, names, source).items():
        matched = {s: by_seed.get(s, by_seed.get(BASELINE_SEED)) for s in seeds}
        if all(v is not None for v in matched.values()):
            base[arm] = {s: v for s, v in matched.items() if v is not None}
    paired = set(base)
    factorial = Factorial.spanned(present)
    computable = {n: c for n, c in factorial.contrasts.items() if c.arms <= set(present)}
    computable |= {n: c for n, c in factorial.baseline_contrasts().items() if c.arms <= set(present) | paired}
    out: SimpleEffects = {}
    for m in names:
        out[m] = {}
        for name, contrast in computable.items():
            values = {
                s: contrast.value(
                    {**{a: cells[(a, s)][m] for a in present}, **{b: v[s][m] for b, v in base.items()}}
                )
                for s in seeds
            }
            out[m][name] = Effect(metric=m, name=name, definition=contrast.text(), per_unit=values, sesoi=sesoi)
    return out



EFFECTS_FAMILY = "mAP effects"
BASELINES_FAMILY = "mAP against baselines"
"""The multiplicity families of a study's effects: its simple effects and interactions on the mAP of every
level and the hier score (the study's primary endpoint), and its cells against the baselines on the same.
Other metrics' effects belong to no family: their p is shown raw, as exploratory."""


def in_primary_family(metric: str) -> bool:
    """Whether effects on `metric` are tested in a family: the mAP of a level or the hier score."""
    return metric.endswith(f"_{MAP}")


def family_adjustments(effects: SimpleEffects) -> dict[tuple[str, str], Adjusted]:
    """(metric, effect) -> its sign-flip p adjusted (Holm, Benjamini-Hochberg) over its family
    (:data:`EFFECTS_FAMILY`, :data:`BASELINES_FAMILY`): `effects` must hold every metric of the family, so
    that the adjustment never depends on which metrics a screen shows."""
    out: dict[tuple[str, str], Adjusted] = {}
    for family, baseline in ((EFFECTS_FAMILY, False), (BASELINES_FAMILY, True)):
        members = {
            (m, n): p_signflip(list(e.per_unit.values()))  # the test alone: each member is rebuilt with its p
            for m, by_name in effects.items()
            if in_primary_family(m)
            for n, e in by_name.items()
            if is_baseline_contrast(n) == baseline
        }
        if members:
            out |= adjusted(members, family)
    return out


def with_adjustments(effects: SimpleEffects, adjustments: Mapping[tuple[str, str], Adjusted]) -> SimpleEffects:
    """`effects` with each member's adjusted p (see :func:`family_adjustments`)."""
    return {
        m: {n: replace(e, adjusted=adjustments.get((m, n))) for n, e in by_name.items()}
        for m, by_name in effects.items()
    }


def effects_json(effects: SimpleEffects) -> dict:
    """The JSON shape of ``hierconsole effects --json`` (seeds as strings, sd null for one seed), with the
    intervals and tests under their :data:`~hierconsole.study.analysis.statistics.EVIDENCE_KEYS`; each
    effect says which arms it compares (`definition`: a name like `geom_R` is the study's own pair)."""
    return {
        metric: {name: {"definition": e.definition, **e.to_json()} for name, e in by_effect.items()}
        for metric, by_effect in effects.items()
    }



def seeds_of(effects: SimpleEffects) -> list[int]:
    """The seeds of an effects result, ascending (every metric and effect shares them)."""
    for by_effect in effects.values():
        for e in by_effect.values():
            return sorted(e.per_unit)
    return []


def iter_effects(effects: SimpleEffects) -> Iterable[Effect]:
    for by_effect in effects.values():
        yield from by_effect.values()
