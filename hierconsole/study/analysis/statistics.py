"""Summaries of per-seed values: the training seed is the statistical unit, every SD the sample SD (n-1).

Each interval and test is a pure function of the per-seed values d_1..d_n of one effect or contrast (Q/G
perturbations already averaged within the seed), with its edge cases named: one seed has no spread, so no
t interval, no bootstrap interval and no `seeds_to_resolve`; ties count towards the sign-flip p-value.
With a smallest effect size of interest (SESOI) declared, the paired TOST and a verdict join them
(`equivalence`); across a family of summaries, Holm and Benjamini-Hochberg adjust the sign-flip p
(`adjusted`). Distributions come from scipy, imported where a summary is computed.
References: tests/study/analysis/test_statistics.py holds each against scipy.stats, statsmodels and a loop
written out there.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import polars as pl

from hierconsole.errors import ConfigError

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

KT = TypeVar("KT", bound=Hashable)
"""A member's key within its multiplicity family."""

CI_QUANTILE = 0.975
"""Two-sided 95 %: the t quantile and the bootstrap's upper percentile (the lower is 1 - this)."""
ALPHA = 0.05
"""The level of every test and verdict: "different" when the 95 % t interval excludes 0, "equivalent" when
both one-sided tests of the TOST reject at this level (its 90 % t interval lies inside ±SESOI)."""
TOST_QUANTILE = 1 - ALPHA
"""The t quantile of the TOST's interval (90 %, two-sided)."""

EQUIVALENT = "equivalent"
DIFFERENT = "different"
EQUIVALENT_AND_DIFFERENT = "equivalent and different"
INCONCLUSIVE = "inconclusive"
VERDICTS = (EQUIVALENT, DIFFERENT, EQUIVALENT_AND_DIFFERENT, INCONCLUSIVE)
"""What an effect is shown to be at its SESOI: `equivalent` (inside ±SESOI, not shown non-zero), `different`
(non-zero, not shown inside), `equivalent and different` (non-zero but smaller than the SESOI) or
`inconclusive` (neither)."""
BOOTSTRAP_EXACT_UP_TO = 100_000
"""With n^n resamples up to this many, the bootstrap enumerates every one (n <= 6): no randomness at all."""
BOOTSTRAP_DRAWS = 10_000
BOOTSTRAP_SEED = 2021
"""The seed of the drawn bootstrap (n >= 7), recorded beside every interval it makes (`ci95_boot_seed`)."""
MAX_SEEDS_TO_RESOLVE = 100_000
"""`seeds_to_resolve` looks this far; an effect that would need more is reported as null."""
SIGNFLIP_MAX_SEEDS = 40
"""The exact sign-flip test counts 2^n patterns by meeting in the middle (2 x 2^(n/2) sums); past this many
seeds that is too slow, and the p-value is null rather than approximate."""

EQUIVALENCE_KEYS = ("sesoi", "ci90_t_lo", "ci90_t_hi", "p_tost", "verdict")
"""The TOST's keys among the evidence keys: null throughout where no SESOI was declared."""
EVIDENCE_KEYS: tuple[str, ...] = (
    "ci95_t_lo",
    "ci95_t_hi",
    "ci95_boot_lo",
    "ci95_boot_hi",
    "ci95_boot_seed",
    "p_signflip",
    "seeds_to_resolve",
    *EQUIVALENCE_KEYS,
    "family",
    "p_holm",
    "p_bh",
)
"""The keys every effect, contrast and pooled row carries, in JSON, CSV and Parquet alike (null where the
statistic is undefined: one seed, or an exactly enumerated bootstrap for `ci95_boot_seed`; no SESOI
declared for the TOST's; a row in no multiplicity family for the adjusted p)."""

EVIDENCE_SCHEMA: dict[str, PolarsDataType] = {
    "ci95_t_lo": pl.Float64,
    "ci95_t_hi": pl.Float64,
    "ci95_boot_lo": pl.Float64,
    "ci95_boot_hi": pl.Float64,
    "ci95_boot_seed": pl.Int64,
    "p_signflip": pl.Float64,
    "seeds_to_resolve": pl.Int64,
    "sesoi": pl.Float64,
    "ci90_t_lo": pl.Float64,
    "ci90_t_hi": pl.Float64,
    "p_tost": pl.Float64,
    "verdict": pl.String,
    "family": pl.String,
    "p_holm": pl.Float64,
    "p_bh": pl.Float64,
}
"""The polars types of the :data:`EVIDENCE_KEYS` columns in exported frames."""

INTERVALS: dict[str, str] = {
    "ci95_t": "95 % t interval of the mean over seeds: mean ± t(0.975, n-1)·SD/√n",
    "ci95_boot": "95 % percentile bootstrap of the mean over seeds (every resample when n^n ≤ 100,000)",
    "ci90_t": "90 % t interval of the mean over seeds (the TOST's): mean ± t(0.95, n-1)·SD/√n",
}
"""Interval name (`<name>_lo` / `<name>_hi` columns) -> what it is, for legends and reports."""

STATISTICS_LEGEND = (
    "ci95_t: mean ± t(0.975, n-1)·SD/√n; ci95_boot: percentile bootstrap of the mean over seeds "
    f"(exact when n^n ≤ {BOOTSTRAP_EXACT_UP_TO:,}, else {BOOTSTRAP_DRAWS:,} draws, seed {BOOTSTRAP_SEED}); "
    "p_signflip: exact two-sided sign-flip p of the mean (2^n patterns, ties counted: n seeds never reach "
    "below 2/2^n); seeds_to_resolve: fewest seeds whose t interval at this mean and SD excludes 0; "
    "p_holm / p_bh: the sign-flip p adjusted over the row's family (Holm: family-wise error; "
    "Benjamini-Hochberg: false discovery rate)"
)


def _t() -> Any:
    """scipy's Student t (imported here: the light commands and the console's first frame never load scipy)."""
    from scipy import stats

    return stats.t


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample SD (ddof=1) of `values`; the SD is None for one value, whose spread is undefined."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    return mean, sd


def t_half_width(sd: float, n: int, quantile: float = CI_QUANTILE) -> float:
    """Half the width of the t interval (95 %; 90 % at quantile 0.95) of a mean of `n` >= 2 values with
    sample SD `sd`."""
    return _t_quantile(quantile, n - 1) * sd / math.sqrt(n)


@functools.lru_cache(maxsize=4096)
def _t_quantile(quantile: float, df: int) -> float:
    """t(quantile, df), kept: `seeds_to_resolve` asks for the same few dozen df for every effect."""
    return float(_t().ppf(quantile, df))


def ci95_t(values: Sequence[float], quantile: float = CI_QUANTILE) -> tuple[float, float] | None:
    """mean ± t(0.975, n-1)·SD/√n (`quantile` 0.95: the 90 % interval); None for fewer than two values
    (no SD, no interval)."""
    if len(values) < 2:
        return None
    mean, sd = mean_sd(values)
    assert sd is not None  # two or more values
    half = t_half_width(sd, len(values), quantile)
    return mean - half, mean + half


def p_tost(values: Sequence[float], sesoi: float) -> float | None:
    """The paired TOST's p against the equivalence bounds ±`sesoi`: the larger of the one-sided t-test p of
    H0 mean <= -sesoi and of H0 mean >= +sesoi (n-1 df). None for fewer than two values. With no spread
    at all the mean is known: 0 inside the bounds, 1 on or outside them."""
    if len(values) < 2:
        return None
    mean, sd = mean_sd(values)
    assert sd is not None
    if sd == 0:
        return 0.0 if abs(mean) < sesoi else 1.0
    se, t = sd / math.sqrt(len(values)), _t()
    df = len(values) - 1
    return float(max(t.sf((mean + sesoi) / se, df), t.cdf((mean - sesoi) / se, df)))


def verdict(ci95: tuple[float, float] | None, p_equivalence: float | None) -> str | None:
    """The :data:`VERDICTS` word for a 95 % t interval and a TOST p (None without either)."""
    if ci95 is None or p_equivalence is None:
        return None
    different = ci95[0] > 0 or ci95[1] < 0
    equivalent = p_equivalence < ALPHA
    if equivalent:
        return EQUIVALENT_AND_DIFFERENT if different else EQUIVALENT
    return DIFFERENT if different else INCONCLUSIVE


def bootstrap_seed(n: int) -> int | None:
    """The seed the bootstrap of `n` values draws from; None when it enumerates every resample instead."""
    return None if n**n <= BOOTSTRAP_EXACT_UP_TO else BOOTSTRAP_SEED


@functools.lru_cache(maxsize=8)
def _every_resample(n: int) -> np.ndarray:
    """The n^n index tuples of every ordered resample of n values (read-only: it is shared)."""
    index = np.array(list(itertools.product(range(n), repeat=n)), dtype=np.intp).reshape(-1, n)
    index.flags.writeable = False
    return index


def bootstrap_means(values: Sequence[float], *, draws: int = BOOTSTRAP_DRAWS, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """The means of the bootstrap resamples of `values`: all n^n ordered resamples (each equally likely)
    when there are at most BOOTSTRAP_EXACT_UP_TO, otherwise `draws` resamples from numpy's default
    generator seeded with `seed`."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if bootstrap_seed(n) is None:
        index = _every_resample(n)
    else:
        index = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    means: np.ndarray = x[index].mean(axis=1)
    return means


def ci95_boot(values: Sequence[float]) -> tuple[float, float] | None:
    """Percentile bootstrap of the mean: the 2.5th and 97.5th percentiles (numpy's default, linear
    interpolation) of the resample means (:func:`bootstrap_means`). None for fewer than two values: one
    value resamples to itself, and a zero-width interval would claim a certainty one seed cannot give."""
    if len(values) < 2:
        return None
    lo, hi = np.percentile(bootstrap_means(values), [100 * (1 - CI_QUANTILE), 100 * CI_QUANTILE])
    return float(lo), float(hi)


def _exact_integers(values: Sequence[float]) -> list[int]:
    """`values` as integers on one common binary scale: every float is m·2^e exactly, so sums and their
    comparisons below are exact and a tie is a tie, not a rounding accident."""
    ratios = [float(v).as_integer_ratio() for v in values]
    scale = max(den for _, den in ratios)  # the denominators are powers of two: the largest divides by all
    return [num * (scale // den) for num, den in ratios]


def _signed_sums(xs: Sequence[int]) -> list[int]:
    sums = [0]
    for x in xs:
        sums = [s + x for s in sums] + [s - x for s in sums]
    return sums


def p_signflip(values: Sequence[float]) -> float | None:
    """Exact two-sided sign-flip permutation p-value of the mean: the share of the 2^n sign patterns s with
    |mean(s·d)| >= |mean(d)|, ties counted (the observed pattern and its mirror always count, so n seeds
    can never go below 2/2^n: 0.25 for three). None without values, or past SIGNFLIP_MAX_SEEDS."""
    n = len(values)
    if n == 0 or n > SIGNFLIP_MAX_SEEDS:
        return None
    ints = _exact_integers(values)
    observed = abs(sum(ints))
    if observed == 0:
        return 1.0
    left = _signed_sums(ints[: n // 2])
    right = sorted(_signed_sums(ints[n // 2 :]))
    # Pattern sums are a + b (one half each); count those with a + b >= T or a + b <= -T (disjoint, T > 0).
    count = sum(len(right) - bisect_left(right, observed - a) + bisect_right(right, -observed - a) for a in left)
    return count / 2**n


def seeds_to_resolve(values: Sequence[float]) -> int | None:
    """The smallest n' >= 2 whose t interval at the observed mean and SD excludes zero, i.e. with
    t(0.975, n'-1)·SD/√n' < |mean|: "needs ~n' seeds". None for fewer than two values, a mean of exactly
    0, or an effect that would need more than MAX_SEEDS_TO_RESOLVE seeds."""
    if len(values) < 2:
        return None
    mean, sd = mean_sd(values)
    assert sd is not None
    if mean == 0:
        return None

    def resolved(k: int) -> bool:
        return t_half_width(sd, k) < abs(mean)

    # The half-width falls with n' (t quantile and 1/√n' both decrease), so the answer is a threshold:
    # refuse at once if even the largest n' does not resolve, then gallop up from 2 and bisect.
    if not resolved(MAX_SEEDS_TO_RESOLVE):
        return None
    lo, hi = 1, 2  # resolved(hi) is the question; lo never resolves (one seed has no interval)
    while not resolved(hi):
        lo, hi = hi, min(2 * hi, MAX_SEEDS_TO_RESOLVE)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if resolved(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class Equivalence:
    """The TOST of one summary at its SESOI (see :func:`p_tost`, :func:`verdict`)."""

    sesoi: float
    ci90_t: tuple[float, float] | None
    p_tost: float | None
    verdict: str | None


@dataclass(frozen=True)
class Adjusted:
    """A summary's sign-flip p adjusted over the family it is tested in (see :func:`adjusted`)."""

    family: str
    p_holm: float | None
    p_bh: float | None


@dataclass(frozen=True)
class Evidence:
    """The intervals and tests of one per-seed summary (see the functions of the same names)."""

    ci95_t: tuple[float, float] | None
    ci95_boot: tuple[float, float] | None
    ci95_boot_seed: int | None
    """The bootstrap's seed; None when every resample was enumerated (no randomness)."""
    p_signflip: float | None
    seeds_to_resolve: int | None
    equivalence: Equivalence | None = None
    """None: no SESOI declared for its metric."""
    adjusted: Adjusted | None = None
    """None: in no multiplicity family."""

    def columns(self) -> dict[str, float | int | str | None]:
        """The flat :data:`EVIDENCE_KEYS` form of JSON rows and table columns."""
        t_lo, t_hi = self.ci95_t or (None, None)
        b_lo, b_hi = self.ci95_boot or (None, None)
        q = self.equivalence
        e_lo, e_hi = (q.ci90_t if q is not None else None) or (None, None)
        a = self.adjusted
        return {
            "ci95_t_lo": t_lo,
            "ci95_t_hi": t_hi,
            "ci95_boot_lo": b_lo,
            "ci95_boot_hi": b_hi,
            "ci95_boot_seed": self.ci95_boot_seed,
            "p_signflip": self.p_signflip,
            "seeds_to_resolve": self.seeds_to_resolve,
            "sesoi": q.sesoi if q is not None else None,
            "ci90_t_lo": e_lo,
            "ci90_t_hi": e_hi,
            "p_tost": q.p_tost if q is not None else None,
            "verdict": q.verdict if q is not None else None,
            "family": a.family if a is not None else None,
            "p_holm": a.p_holm if a is not None else None,
            "p_bh": a.p_bh if a is not None else None,
        }

    @property
    def resolved(self) -> bool:
        """Whether the t interval excludes zero at the seeds there are."""
        return self.ci95_t is not None and (self.ci95_t[0] > 0 or self.ci95_t[1] < 0)


def equivalence(values: Sequence[float], sesoi: float) -> Equivalence:
    """The TOST of `values` against ±`sesoi` (> 0), its 90 % interval and its verdict."""
    if not (sesoi > 0 and math.isfinite(sesoi)):
        raise ValueError(f"a SESOI must be a positive number, not {sesoi!r}")
    p = p_tost(values, sesoi)
    return Equivalence(
        sesoi=sesoi, ci90_t=ci95_t(values, TOST_QUANTILE), p_tost=p, verdict=verdict(ci95_t(values), p)
    )


def evidence(values: Sequence[float], sesoi: float | None = None) -> Evidence:
    """Every interval and test of the per-seed values `values` (one effect or contrast); the TOST too with
    a `sesoi`."""
    values = list(values)
    return Evidence(
        ci95_t=ci95_t(values),
        ci95_boot=ci95_boot(values),
        ci95_boot_seed=bootstrap_seed(len(values)) if len(values) >= 2 else None,
        p_signflip=p_signflip(values),
        seeds_to_resolve=seeds_to_resolve(values),
        equivalence=None if sesoi is None else equivalence(values, sesoi),
    )


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error): the k-th smallest p times (m - k + 1), made
    non-decreasing in that order and capped at 1."""
    m = len(p)
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg's adjustment (false discovery rate), as scipy computes it."""
    if not p:
        return []
    from scipy import stats

    return [float(v) for v in stats.false_discovery_control(np.asarray(p, dtype=np.float64), method="bh")]


def adjusted(p_values: Mapping[KT, float | None], family: str) -> dict[KT, Adjusted]:
    """Holm and Benjamini-Hochberg over the p-values of one family (key -> p). A key whose p is None (a test
    that could not be run) stays in the family with no adjusted p and is not counted among its tests."""
    tested = {k: v for k, v in p_values.items() if v is not None}
    keys = list(tested)
    by_holm = dict(zip(keys, holm(list(tested.values())), strict=True))
    by_bh = dict(zip(keys, benjamini_hochberg(list(tested.values())), strict=True))
    return {k: Adjusted(family=family, p_holm=by_holm.get(k), p_bh=by_bh.get(k)) for k in p_values}


@dataclass(frozen=True)
class VarianceComponents:
    """How much of an arm metric's spread is seeds and how much query/gallery draws.

    With x[s][p] the value of seed s on perturbation p: `between_seed` is the sample variance of the seed
    means (the spread the SD over seeds shows); `within_seed` the sample variance over a seed's
    perturbations, averaged over seeds (the Q/G draws' share); `seed` the method-of-moments estimate of
    the seeds' own variance under x = mu + seed + qg, E[between] = seed + within / P, i.e.
    between - within · mean(1/P_s), floored at 0 (it can come out negative by chance).
    """

    between_seed: float | None
    """None with one seed."""
    within_seed: float | None
    """None when no seed has two perturbations."""
    seed: float | None
    """None when either of the above is."""
    n_seeds: int
    n_perturbations: int
    """Perturbations per seed (the largest, should they differ)."""


def variance_components(groups: Sequence[Sequence[float]]) -> VarianceComponents:
    """Variance components of `groups`, one sequence of per-perturbation values per seed."""
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("variance components need at least one value for every seed")
    seed_means = [statistics.fmean(g) for g in groups]
    between = statistics.variance(seed_means) if len(groups) > 1 else None
    spread = [statistics.variance(g) for g in groups if len(g) > 1]
    within = statistics.fmean(spread) if spread else None
    seed = None
    if between is not None and within is not None:
        seed = max(0.0, between - within * statistics.fmean(1 / len(g) for g in groups))
    return VarianceComponents(
        between_seed=between,
        within_seed=within,
        seed=seed,
        n_seeds=len(groups),
        n_perturbations=max(len(g) for g in groups),
    )


SESOI_HELP = (
    "smallest effect size of interest, in the metric's units (e.g. 0.01: one mAP point): each effect gets "
    "the paired TOST against ±DELTA and a verdict (equivalent, different, both, inconclusive)"
)


def parse_sesoi(text: str | None, option: str = "--sesoi") -> float | None:
    """A SESOI as typed (None: none given); a ConfigError naming `option` unless it is a positive number."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(
            f"{option} {text}: the smallest effect size of interest is a positive number in the metric's "
            "units\n  fix: e.g. --sesoi 0.01 (one point of mAP)"
        )
    return value
