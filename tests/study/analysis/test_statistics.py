"""The intervals and tests of study/analysis/statistics.py against scipy.stats and loops written out here,
with the edge cases named: one seed, two, three, seven (the first drawn bootstrap) and ties."""

from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats

from hierconsole.errors import ConfigError
from hierconsole.study.analysis.effects import EFFECTS_FAMILY
from hierconsole.study.analysis.effects_view import effects_view
from hierconsole.study.analysis.statistics import (
    ALPHA,
    BOOTSTRAP_DRAWS,
    BOOTSTRAP_SEED,
    DIFFERENT,
    EQUIVALENT,
    EQUIVALENT_AND_DIFFERENT,
    EVIDENCE_KEYS,
    INCONCLUSIVE,
    MAX_SEEDS_TO_RESOLVE,
    SIGNFLIP_MAX_SEEDS,
    VERDICTS,
    adjusted,
    benjamini_hochberg,
    bootstrap_seed,
    ci95_boot,
    ci95_t,
    equivalence,
    evidence,
    holm,
    p_signflip,
    p_tost,
    parse_sesoi,
    seeds_to_resolve,
    variance_components,
)

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


# ------------------------------------------------------------------------------------ equivalence (TOST)


@pytest.mark.parametrize("sesoi", [0.001, 0.005, 0.02, 0.5])
@pytest.mark.parametrize("name", [*SAMPLES, "mirror", "zero_member"])
def test_tost_is_the_larger_one_sided_t_test_and_statsmodels_ttost(name, sesoi):
    values = (SAMPLES | TIES)[name]
    lower = stats.ttest_1samp(values, -sesoi, alternative="greater").pvalue
    upper = stats.ttest_1samp(values, sesoi, alternative="less").pvalue
    assert p_tost(values, sesoi) == pytest.approx(max(lower, upper), rel=1e-12, abs=1e-300)
    ttost_paired = pytest.importorskip("statsmodels.stats.weightstats").ttost_paired
    p_sm = ttost_paired(np.asarray(values), np.zeros(len(values)), -sesoi, sesoi)[0]
    assert p_tost(values, sesoi) == pytest.approx(p_sm, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_the_tosts_interval_is_the_90_percent_t_interval(name):
    values = SAMPLES[name]
    ref = stats.t.interval(0.90, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert equivalence(values, 0.01).ci90_t == pytest.approx(ref, rel=1e-12)
    # Equivalent at 5 % exactly when that interval lies inside the bounds (the TOST's duality).
    for sesoi in (0.001, 0.01, 0.1, 1.0, 3.0):
        q = equivalence(values, sesoi)
        assert (q.p_tost < ALPHA) == (-sesoi < q.ci90_t[0] and q.ci90_t[1] < sesoi)


def test_each_verdict_from_an_effect_made_for_it():
    # Tight around 0.02: non-zero, and inside ±0.05 but not ±0.01.
    tight = [0.0199, 0.0201, 0.0200, 0.0202, 0.0198]
    assert equivalence(tight, 0.05).verdict == EQUIVALENT_AND_DIFFERENT
    assert equivalence(tight, 0.01).verdict == DIFFERENT
    # Around zero and tight: equivalent at 0.01, not shown non-zero.
    assert equivalence([0.001, -0.0012, 0.0004, -0.0001, 0.0002], 0.01).verdict == EQUIVALENT
    # Three wide seeds: neither.
    assert equivalence([0.03, -0.04, 0.01], 0.01).verdict == INCONCLUSIVE
    assert set(VERDICTS) == {EQUIVALENT, DIFFERENT, EQUIVALENT_AND_DIFFERENT, INCONCLUSIVE}


def test_tost_edge_cases_one_seed_and_no_spread():
    assert p_tost([0.1], 0.5) is None and equivalence([0.1], 0.5).verdict is None
    assert p_tost([0.2, 0.2, 0.2], 0.5) == 0.0  # known exactly: inside the bounds
    assert p_tost([0.5, 0.5], 0.5) == 1.0  # on a bound is not inside
    assert equivalence([0.2, 0.2, 0.2], 0.5).verdict == EQUIVALENT_AND_DIFFERENT
    with pytest.raises(ValueError, match="positive"):
        equivalence([0.1, 0.2], 0.0)
    # Without a SESOI nothing of the TOST is claimed.
    cols = evidence(SAMPLES["n3"]).columns()
    assert [cols[k] for k in ("sesoi", "ci90_t_lo", "ci90_t_hi", "p_tost", "verdict")] == [None] * 5
    cols = evidence(SAMPLES["n3"], 0.01).columns()
    assert cols["sesoi"] == 0.01 and cols["verdict"] in VERDICTS


@pytest.mark.parametrize("text", ["0", "-0.01", "nan", "inf", "abc", ""])
def test_a_bad_sesoi_is_one_line_naming_the_option(text):
    with pytest.raises(ConfigError) as caught:
        parse_sesoi(text)
    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"--sesoi {text}:") and "positive number" in first
    assert parse_sesoi("0.005") == 0.005 and parse_sesoi(None) is None


# ----------------------------------------------------------------------------------------- multiplicity


P_FAMILIES = {
    "spread": [0.25, 0.5, 0.125, 1.0, 0.75],
    "ties": [0.25, 0.25, 0.25, 0.5, 1.0],
    "tiny": [1e-4, 0.02, 0.03, 0.04, 0.5, 0.9, 0.011],
    "one": [0.03],
}


@pytest.mark.parametrize("name", list(P_FAMILIES))
def test_holm_and_bh_equal_statsmodels_multipletests(name):
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    p = P_FAMILIES[name]
    assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]), rel=1e-12)
    assert benjamini_hochberg(p) == pytest.approx(list(multipletests(p, method="fdr_bh")[1]), rel=1e-12)


def test_a_test_that_could_not_run_stays_in_its_family_unadjusted_and_uncounted():
    found = adjusted({"a": 0.25, "b": None, "c": 0.5}, "mine")
    assert found["b"].p_holm is None and found["b"].family == "mine"
    assert found["a"].p_holm == 0.5 and found["c"].p_holm == 0.5  # m = 2, not 3
    assert [found[k].p_bh for k in "ac"] == [0.5, 0.5]


# ------------------------------------------------------------------- a study's families and its adjusted p


def _table() -> pl.DataFrame:
    rows = []
    rng = np.random.default_rng(5)
    for arm, shift in (("E_R", 0.0), ("H_R", 0.01), ("E_S", 0.03), ("H_S", 0.035)):
        for seed in (42, 2024, 3407, 7):
            row = {"arm": arm, "seed": seed}
            for level, base in (("leaf", 0.6), ("middle", 0.5), ("high", 0.55), ("hier", 0.53)):
                row[f"{level}_mAP"] = base + shift + float(rng.normal(0, 0.004))
            row["leaf_R@1"] = 0.5 + shift + float(rng.normal(0, 0.01))
            rows.append(row)
    return pl.DataFrame(rows)


def test_a_studys_mAP_effects_are_one_family_whichever_metrics_are_shown():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    table = _table()
    whole = effects_view(table, source="t")
    # The family: every simple effect and interaction on the mAP of every level and the hier score.
    members = [(m, n) for m, by in whole.effects.items() if m.endswith("_mAP") for n in by]
    assert len(members) == 4 * 5
    p = [whole.effects[m][n].evidence.p_signflip for m, n in members]
    holm_p, bh_p = multipletests(p, method="holm")[1], multipletests(p, method="fdr_bh")[1]
    for (m, n), h, b in zip(members, holm_p, bh_p, strict=True):
        a = whole.effects[m][n].adjusted
        assert a is not None and a.family == EFFECTS_FAMILY
        assert (a.p_holm, a.p_bh) == pytest.approx((h, b), rel=1e-12)
    # A recall metric's effects are exploratory: raw p only.
    assert all(e.adjusted is None for e in whole.effects["leaf_R@1"].values())
    # Showing one metric does not shrink the family its p are adjusted over.
    one = effects_view(table, source="t", metrics=["hier_mAP"])
    assert list(one.effects) == ["hier_mAP"]
    assert one.effects["hier_mAP"]["geom_R"].adjusted == whole.effects["hier_mAP"]["geom_R"].adjusted
    assert one.effects["hier_mAP"]["geom_R"].evidence.columns() == whole.effects["hier_mAP"]["geom_R"].evidence.columns()


def test_a_sesoi_reaches_every_effect_and_its_json():
    view = effects_view(_table(), source="t", sesoi=0.02)
    geom = view.effects["hier_mAP"]["geom_R"]
    values = list(geom.per_unit.values())
    assert geom.evidence.equivalence == equivalence(values, 0.02)
    doc = view.to_json()["effects"]["hier_mAP"]["geom_R"]
    assert doc["sesoi"] == 0.02 and doc["verdict"] == geom.evidence.equivalence.verdict
    assert doc["family"] == EFFECTS_FAMILY and doc["p_holm"] == geom.adjusted.p_holm
