"""The one paired summary (study/analysis/paired.py) against a reference written out here with numpy and
scipy, for per-unit vectors from one unit to a drawn bootstrap, zero variance and all-zero among them; and
every effect-like result type is that summary, its keys naming its unit."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hierconsole.study.analysis.contrasts import ContrastRow
from hierconsole.study.analysis.effects import Effect
from hierconsole.study.analysis.headline import Headline
from hierconsole.study.analysis.outer_arms import ArmSummary, GainSummary
from hierconsole.study.analysis.paired import PairedSummary, summary_schema
from hierconsole.study.analysis.pooled import PooledEffect
from hierconsole.study.analysis.statistics import EVIDENCE_KEYS

VECTORS = {
    "one": [0.0123],
    "one_zero": [0.0],
    "two": [0.0123, -0.0041],
    "zero_variance": [0.02, 0.02, 0.02],
    "zero_variance_negative": [-0.5, -0.5],
    "all_zero": [0.0, 0.0, 0.0, 0.0],
    "three": [0.0017, 0.0058, -0.0024],
    "with_a_zero": [0.01, 0.0, -0.003, 0.02, 0.004],
    "seven": [0.3, -0.1, 0.2, 0.05, 0.01, -0.02, 0.4],
}


def reference(values: list[float]) -> dict:
    """Every statistic of `values` from its definition, with numpy and scipy, independently of the package."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    mean = float(np.mean(x))
    sd = float(np.std(x, ddof=1)) if n > 1 else None
    ref: dict = {"mean": mean, "sd": sd, "positive": int(np.sum(x > 0)), "n": n}
    if n < 2:
        ref |= {"ci95_t": None, "ci95_boot": None, "ci95_boot_seed": None, "seeds_to_resolve": None}
    else:
        assert sd is not None
        t = stats.t.ppf(0.975, n - 1)
        ref["ci95_t"] = (mean - t * sd / math.sqrt(n), mean + t * sd / math.sqrt(n))
        if n**n <= 100_000:  # every ordered resample, each equally likely
            means = np.array([x[list(idx)].mean() for idx in itertools.product(range(n), repeat=n)])
            ref["ci95_boot_seed"] = None
        else:
            means = x[np.random.default_rng(2021).integers(0, n, size=(10_000, n))].mean(axis=1)
            ref["ci95_boot_seed"] = 2021
        ref["ci95_boot"] = tuple(float(v) for v in np.percentile(means, [2.5, 97.5]))
        # The fewest seeds k >= 2 whose t interval at this mean and SD excludes zero: a plain scan.
        resolving = (k for k in range(2, 10_000) if stats.t.ppf(0.975, k - 1) * sd / math.sqrt(k) < abs(mean))
        ref["seeds_to_resolve"] = next(resolving, None) if mean != 0 else None
    # Exact two-sided sign-flip p: the share of the 2^n patterns whose |sum| reaches the observed one (ties
    # counted), in exact fractions so that a tie is a tie.
    d = [Fraction(v) for v in values]
    observed = abs(sum(d))
    hits = sum(abs(sum(s * v for s, v in zip(signs, d, strict=True))) >= observed for signs in itertools.product((1, -1), repeat=n))
    ref["p_signflip"] = hits / 2**n
    return ref


@pytest.mark.parametrize("values", VECTORS.values(), ids=VECTORS.keys())
def test_the_summary_matches_a_reference_written_out_with_numpy_and_scipy(values):
    s = PairedSummary(per_unit={seed: v for seed, v in enumerate(values, start=1)})
    ref = reference(values)
    assert s.mean == pytest.approx(ref["mean"], rel=1e-15, abs=1e-18)
    assert (s.sd is None) == (ref["sd"] is None) and s.sd == pytest.approx(ref["sd"], rel=1e-12, abs=1e-18)
    assert (s.positive, s.n) == (ref["positive"], ref["n"])
    e = s.evidence
    for name in ("ci95_t", "ci95_boot"):
        got, want = getattr(e, name), ref[name]
        assert (got is None) == (want is None), name
        if want is not None:
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15), name
    assert e.ci95_boot_seed == ref["ci95_boot_seed"]
    assert e.p_signflip == ref["p_signflip"]
    assert e.seeds_to_resolve == ref["seeds_to_resolve"]


def test_one_unit_and_zero_variance_are_named_edge_cases():
    one = PairedSummary(per_unit={42: 0.01})
    assert one.sd is None and one.evidence.ci95_t is None and one.evidence.ci95_boot is None
    assert one.evidence.p_signflip == 1.0  # both sign patterns reach |0.01|
    flat = PairedSummary(per_unit={1: 0.02, 2: 0.02, 3: 0.02})
    assert flat.sd == 0.0 and flat.evidence.ci95_t == (0.02, 0.02) and flat.evidence.seeds_to_resolve == 2
    zero = PairedSummary(per_unit={1: 0.0, 2: 0.0})
    assert zero.positive == 0 and zero.evidence.seeds_to_resolve is None and zero.evidence.p_signflip == 1.0


@pytest.mark.parametrize(("unit", "per", "positive", "n"), [
    ("seed", "per_seed", "positive_seeds", "n_seeds"),
    ("split", "per_split", "positive_splits", "n_splits"),
    ("member", "per_member", "positive_members", "n_members"),
])  # fmt: skip
def test_the_unit_names_the_keys_scripts_read(unit, per, positive, n):
    s = PairedSummary(per_unit={"a": 0.5, "b": -0.25}, unit=unit)
    doc = s.to_json()
    assert list(doc) == [per, "mean", "sd", positive, n, *EVIDENCE_KEYS]
    assert doc[per] == {"a": 0.5, "b": -0.25} and (doc[positive], doc[n]) == (1, 2)
    assert list(summary_schema(unit)) == list(s.columns())
    assert list(s.to_json(named=False)) == ["per_unit", "mean", "sd", "positive", "n", *EVIDENCE_KEYS]


def test_every_effect_like_result_is_the_one_summary_with_its_unit():
    per = {1: 0.3, 2: -0.1, 3: 0.2}
    labelled = {"a": 0.3, "b": -0.1, "c": 0.2}
    results = [
        (Effect(metric="hier_mAP", name="geom_R", definition="H_R - E_R", per_unit=per), "seed"),
        (ContrastRow(arm_a="H_R", arm_b="H_R", level="leaf", per_unit=per), "seed"),
        (PooledEffect(metric="hier_mAP", name="geom_R", definition="H_R - E_R", per_unit=labelled), "member"),
        (Headline(metric="hier_mAP", loss="loss_E", geometry="geom_R", definition="|E_S - E_R| - |H_R - E_R|", per_unit=labelled), "seed"),
        (GainSummary(name="g", a="x", b="y", metric="leaf_mAP", per_unit=labelled), "split"),
        (ArmSummary(name="x", label="X", arm="H_S", configuration=None, metric="leaf_mAP", per_unit=labelled,
                    seeds=dict.fromkeys(labelled, 3)), "split"),
    ]  # fmt: skip
    plain = PairedSummary(per_unit=per)
    for result, unit in results:
        assert isinstance(result, PairedSummary) and result.unit == unit
        assert (result.mean, result.sd, result.positive, result.n) == (plain.mean, plain.sd, plain.positive, plain.n)
        assert result.evidence == plain.evidence
