"""What a study's effects screen holds — arms with baselines, simple effects, cells against baselines,
the level-wise redistribution and what was left out — computed once for `hierconsole effects`, its
`--json` and the console's Effects view, so the front ends cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from hierconsole.factorial import Factorial, is_baseline_contrast
from hierconsole.levels import PAPER_CODES
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import SimpleEffects, effects_json, omitted_text, simple_effects
from hierconsole.study.analysis.per_seed import LevelsLike, codes_of, table_levels
from hierconsole.study.analysis.redistribution import Redistribution, can_redistribute, redistribution
from hierconsole.vocabulary import MAP


@dataclass(frozen=True)
class EffectsView:
    source: str
    per_seed: pl.DataFrame
    """arm, seed, one column per metric (Q/G perturbations averaged within seed)."""
    baselines: pl.DataFrame | None
    arms: pl.DataFrame
    """arm, metric, mean, sd, n: the cells then the baselines (`arms.arm_table`)."""
    effects: SimpleEffects
    """metric -> simple effects and interactions of the factorial the arms span."""
    baseline_contrasts: SimpleEffects
    """metric -> `<arm>_vs_<baseline>`; empty without baselines."""
    redistribution: Redistribution | None
    """mAP at every level, H − E per loss; None without every level's mAP or a geometry pair."""
    omitted: str | None
    """Which effects a study training a subset of the cells cannot have, and why."""
    aggregation: str | None = None
    """The aggregation reported (`vocabulary.aggregation_label`: `macro (post-hoc)` for a re-score);
    None for a per-seed CSV, whose aggregation the tool does not know."""
    posthoc: bool = False
    """Whether `aggregation` is a post-hoc re-score rather than the study's registered endpoint."""
    levels: tuple[str, ...] = PAPER_CODES
    """The study's level codes, leaf first (of the table's columns for a per-seed CSV)."""

    @property
    def factorial(self) -> Factorial:
        """The factorial the arms span (its legend names the arm codes)."""
        return Factorial.spanned(self.per_seed["arm"].to_list())

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of `hierconsole effects --json`: every number the text form shows."""
        return {
            "source": self.source,
            "aggregation": self.aggregation,
            "arms": self.arms.to_dicts(),
            "effects": effects_json(self.effects),
            "baseline_contrasts": effects_json(self.baseline_contrasts),
            "redistribution": None if self.redistribution is None else self.redistribution.to_json(),
            "omitted": self.omitted,
        }


def _only(effects: SimpleEffects, baseline: bool) -> SimpleEffects:
    kept = {m: {n: e for n, e in by_name.items() if is_baseline_contrast(n) == baseline} for m, by_name in effects.items()}
    return {m: by_name for m, by_name in kept.items() if by_name}


def effects_view(
    per_seed: pl.DataFrame,
    *,
    source: str,
    metrics: Sequence[str] | None = None,
    effect_metrics: Sequence[str] | None = None,
    baselines: pl.DataFrame | None = None,
    aggregation: str | None = None,
    posthoc: bool = False,
    levels: LevelsLike | None = None,
    sesoi: float | None = None,
) -> EffectsView:
    """`metrics` for the arm table (default: every metric column), `effect_metrics` for the effects
    (default: `metrics`); `levels`: the study's (default: those of the table's columns); the
    redistribution needs every one's mAP. With a `sesoi`, every effect's TOST and verdict against it.
    The adjusted p of the mAP effects are over the whole family (every level), whichever metrics are shown."""
    everything = simple_effects(per_seed, effect_metrics or metrics, source=source, baselines=baselines, sesoi=sesoi)
    shown = list(metrics) if metrics else None
    codes = table_levels(per_seed.columns) if levels is None else codes_of(levels)
    every_level = all(f"{level}_{MAP}" in per_seed.columns for level in codes)
    wants_levels = metrics is None or f"{codes[0]}_{MAP}" in metrics
    return EffectsView(
        source=source,
        per_seed=per_seed,
        baselines=baselines,
        arms=arm_table(per_seed, shown, source=source, baselines=baselines),
        effects=_only(everything, baseline=False),
        baseline_contrasts=_only(everything, baseline=True),
        redistribution=(
            redistribution(per_seed, "mAP", source=source, levels=codes)
            if every_level and wants_levels and can_redistribute(per_seed)
            else None
        ),
        omitted=omitted_text(per_seed["arm"].to_list()),
        aggregation=aggregation,
        posthoc=posthoc,
        levels=codes,
    )
