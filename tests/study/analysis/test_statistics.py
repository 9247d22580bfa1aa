"""The intervals and tests of study/analysis/statistics.py against scipy.stats and loops written out here,
with the edge cases named: one seed, two, three, seven (the first drawn bootstrap) and ties."""

from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hierconsole.study.analysis.statistics import (
    BOOTSTRAP_DRAWS,
    BOOTSTRAP_SEED,
    EVIDENCE_KEYS,
    MAX_SEEDS_TO_RESOLVE,
    SIGNFLIP_MAX_SEEDS,
    bootstrap_seed,
    ci95_boot,
    ci95_t,
    evidence,
    p_signflip,
    seeds_to_resolve,
    variance_components,
)
from hierconsole.study.analysis.student_t import t_ppf

# Per-seed effect values of the sizes the issue names; the NABirds geom_R row of paper Table S7 among them.
SAMPLES = {
    "n2": [0.0123, -0.0041],
    "n3": [0.0017, 0.0058, -0.0024],
    "n3_paper_geom_R": [0.005915, 0.000974, -0.001770],
    "n7": [0.3, -0.1, 0.2, 0.05, 0.01, -0.02, 0.4],
    "n4": [0.012, 0.011, 0.013, 0.0105],
    "n6": [1.5, -0.25, 0.75, 2.0, 0.125, -1.0],
    "n10": [0.8, 1.1, -0.3, 0.4, 0.9, 1.7, -0.2, 0.05, 0.6, 1.3],
}
TIES = {
    "all_equal": [0.25, 0.25, 0.25],
    "zero_member": [1.0, 1.0, 0.0],
    "mirror": [1.0, -1.0, 1.0],
    "all_zero": [0.0, 0.0, 0.0],
    "equal_pair": [2.0, 2.0],
}


# --------------------------------------------------------------------------------------- Student t


@pytest.mark.parametrize("df", [1, 2, 3, 4, 6, 9, 29, 30, 99, 1000, 99_999, 100_000])
@pytest.mark.parametrize("p", [0.975, 0.995, 0.9, 0.6, 0.025, 1e-6])
def test_t_quantile_matches_scipy(p, df):
    # The large-df tail is held to 1e-12 relative: the continued fraction of a = df/2 = 50,000 sums a few
    # hundred terms (against mpmath at 40 digits the worst case here is 7e-13).
    assert t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-12)


# ----------------------------------------------------------------------------------------- t interval


@pytest.mark.parametrize("name", [*SAMPLES, *TIES])
def test_t_interval_matches_scipy_and_the_formula(name):
    values = (SAMPLES | TIES)[name]
    n = len(values)
    lo, hi = ci95_t(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    assert (lo, hi) == pytest.approx((mean - half, mean + half), rel=1e-12, abs=1e-15)
    if sd > 0:  # scipy's interval with scale 0 is nan
        ref = stats.t.interval(0.95, n - 1, loc=np.mean(values), scale=stats.sem(values))
        assert (lo, hi) == pytest.approx(ref, rel=1e-12)
    else:
        assert lo == hi == pytest.approx(mean)


def test_one_seed_has_no_interval_no_bootstrap_and_no_seeds_to_resolve():
    assert ci95_t([0.01]) is None
    assert ci95_boot([0.01]) is None
    assert seeds_to_resolve([0.01]) is None
    # The sign-flip test is defined for one value: both of its two patterns reach |mean|.
    assert p_signflip([0.01]) == 1.0
    e = evidence([0.01])
    assert e.columns() == dict.fromkeys(EVIDENCE_KEYS) | {"p_signflip": 1.0}
    assert not e.resolved


# ------------------------------------------------------------------------------------------ bootstrap


def _linear_percentile(sorted_values: list[float], q: float) -> float:
    """numpy's default ('linear') percentile, written out: position q/100 * (N - 1) between order stats."""
    pos = q / 100 * (len(sorted_values) - 1)
    below = math.floor(pos)
    above = min(below + 1, len(sorted_values) - 1)
    return sorted_values[below] + (pos - below) * (sorted_values[above] - sorted_values[below])


@pytest.mark.parametrize("name", ["n2", "n3", "n3_paper_geom_R", "n4", "n6", *TIES])
def test_exact_bootstrap_enumerates_every_resample(name):
    values = (SAMPLES | TIES)[name]
    n = len(values)
    assert n**n <= 100_000 and bootstrap_seed(n) is None
    means = sorted(sum(values[i] for i in resample) / n for resample in itertools.product(range(n), repeat=n))
    assert len(means) == n**n
    expected = (_linear_percentile(means, 2.5), _linear_percentile(means, 97.5))
    assert ci95_boot(values) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    # No randomness: the same values give the same interval, bit for bit.
    assert ci95_boot(values) == ci95_boot(list(values))


@pytest.mark.parametrize("name", ["n7", "n10"])
def test_drawn_bootstrap_is_scipys_percentile_bootstrap_with_the_recorded_seed(name):
    values = SAMPLES[name]
    assert bootstrap_seed(len(values)) == BOOTSTRAP_SEED
    ref = stats.bootstrap(
        (np.array(values),),
        np.mean,
        method="percentile",
        n_resamples=BOOTSTRAP_DRAWS,
        vectorized=True,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    ).confidence_interval
    assert ci95_boot(values) == pytest.approx((ref.low, ref.high), rel=1e-12)
    # And against a loop over the same draws.
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = rng.integers(0, len(values), size=(BOOTSTRAP_DRAWS, len(values)))
    means = sorted(sum(values[i] for i in row) / len(values) for row in draws)
    assert ci95_boot(values) == pytest.approx(
        (_linear_percentile(means, 2.5), _linear_percentile(means, 97.5)), rel=1e-12
    )


def test_bootstrap_interval_holds_the_mean_and_lies_within_the_values():
    for values in SAMPLES.values():
        lo, hi = ci95_boot(values)
        assert min(values) <= lo <= statistics.fmean(values) <= hi <= max(values)


# ------------------------------------------------------------------------------------------ sign-flip


def _signflip_loop(values: list[float]) -> float:
    """Every sign pattern, in exact rational arithmetic, |mean| compared with ties counted."""
    exact = [Fraction(v) for v in values]
    observed = abs(sum(exact))
    hits = sum(
        abs(sum(s * v for s, v in zip(signs, exact, strict=True))) >= observed
        for signs in itertools.product((1, -1), repeat=len(values))
    )
    return hits / 2 ** len(values)


@pytest.mark.parametrize("name", [*SAMPLES, *TIES])
def test_signflip_p_matches_a_loop_and_scipys_permutation_test(name):
    values = (SAMPLES | TIES)[name]
    p = p_signflip(values)
    assert p == _signflip_loop(values)
    ref = stats.permutation_test(
        (np.array(values),),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        n_resamples=np.inf,
        alternative="two-sided",
        vectorized=True,
    )
    assert p == pytest.approx(ref.pvalue, rel=1e-12)


def test_signflip_counts_ties_and_states_the_floor_of_few_seeds():
    # Three seeds all positive: only the observed pattern and its mirror reach |mean|; p can never be < 0.25.
    assert p_signflip([0.01, 0.02, 0.03]) == 0.25
    assert min(_signflip_loop(list(v)) for v in itertools.product((0.5, -0.25, 2.0), repeat=3)) == 0.25
    # A zero seed ties with itself flipped: four patterns of eight reach the observed |mean|.
    assert p_signflip(TIES["zero_member"]) == 0.5
    # Equal magnitudes: every pattern of [1, -1, 1] has |sum| >= 1.
    assert p_signflip(TIES["mirror"]) == 1.0
    # A mean of exactly 0: every pattern counts.
    assert p_signflip(TIES["all_zero"]) == 1.0
    # Ties that floats would lose: 0.1 + 0.2 - 0.3 is not 0 in float64, but in exact arithmetic the pattern
    # (+, +, -) of [0.1, 0.2, 0.3] ties neither way; the result is the exact rational count.
    assert p_signflip([0.1, 0.2, 0.3]) == _signflip_loop([0.1, 0.2, 0.3]) == 0.25


def test_signflip_is_exact_for_many_seeds():
    values = [((-1) ** i) * (i % 5 + 1) * 0.01 for i in range(14)]
    assert p_signflip(values) == _signflip_loop(values)
    # Forty equal seeds: only the two all-same patterns reach |mean|, exactly 2 / 2^40 (no loop could check
    # 2^40 patterns; meeting in the middle counts 2 x 2^20 sums).
    assert p_signflip([0.5] * SIGNFLIP_MAX_SEEDS) == 2 / 2**SIGNFLIP_MAX_SEEDS
    assert p_signflip([0.5] * (SIGNFLIP_MAX_SEEDS + 1)) is None


# ---------------------------------------------------------------------------------- seeds_to_resolve


def _seeds_loop(values: list[float]) -> int | None:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values)
    ks = np.arange(2, MAX_SEEDS_TO_RESOLVE + 1)
    half = stats.t.ppf(0.975, ks - 1) * sd / np.sqrt(ks)
    hits = np.nonzero(half < abs(mean))[0]
    return int(ks[hits[0]]) if hits.size else None


@pytest.mark.parametrize("name", [*SAMPLES, *TIES])
def test_seeds_to_resolve_matches_a_scan_of_every_n(name):
    values = (SAMPLES | TIES)[name]
    expected = None if statistics.fmean(values) == 0 else _seeds_loop(values)
    assert seeds_to_resolve(values) == expected


def test_seeds_to_resolve_edges():
    assert seeds_to_resolve(TIES["all_equal"]) == 2  # no spread: two seeds already exclude 0
    assert seeds_to_resolve(TIES["all_zero"]) is None  # a mean of 0 is never resolved
    # An effect far smaller than its spread would need more than 100,000 seeds: null, not a huge number.
    assert seeds_to_resolve([1.0, -1.0, 0.001]) is None
    # The paper's NABirds geom_R (+0.0017 ± 0.0037 over three seeds) needs tens of seeds.
    n = seeds_to_resolve(SAMPLES["n3_paper_geom_R"])
    assert n is not None and 10 < n < 100
    # A resolved effect reports at most the seeds it has.
    resolved = SAMPLES["n4"]
    assert evidence(resolved).resolved and seeds_to_resolve(resolved) <= len(resolved)


# ------------------------------------------------------------------------------- variance components


def test_variance_components_against_a_loop_and_scipys_one_way_anova():
    groups = [[0.41, 0.43, 0.40], [0.45, 0.44, 0.47], [0.39, 0.42, 0.38]]
    vc = variance_components(groups)
    means = [sum(g) / len(g) for g in groups]
    grand = sum(means) / len(means)
    between = sum((m - grand) ** 2 for m in means) / (len(groups) - 1)
    within = sum(sum((x - m) ** 2 for x in g) / (len(g) - 1) for g, m in zip(groups, means, strict=True)) / len(groups)
    assert vc.between_seed == pytest.approx(between, rel=1e-12)
    assert vc.within_seed == pytest.approx(within, rel=1e-12)
    assert vc.seed == pytest.approx(between - within / 3, rel=1e-12)
    assert (vc.n_seeds, vc.n_perturbations) == (3, 3)
    # Balanced one-way ANOVA: F = MS_between / MS_within = P * between / within.
    f = stats.f_oneway(*groups).statistic
    assert 3 * vc.between_seed / vc.within_seed == pytest.approx(f, rel=1e-12)


def test_variance_components_edges():
    # Q/G noise larger than the seed spread: the seed component is floored at 0.
    vc = variance_components([[0.0, 1.0], [0.1, 0.9]])
    assert vc.seed == 0.0 and vc.between_seed == 0.0
    one_seed = variance_components([[0.4, 0.5, 0.6]])
    assert one_seed.between_seed is None and one_seed.seed is None
    assert one_seed.within_seed == pytest.approx(0.01)
    one_draw = variance_components([[0.4], [0.5]])
    assert one_draw.within_seed is None and one_draw.between_seed == pytest.approx(0.005)
    with pytest.raises(ValueError):
        variance_components([[0.4], []])
