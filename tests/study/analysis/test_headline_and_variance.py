"""The headline comparison |loss effect| - |geometry effect| and the arm metrics' variance components,
each against a loop written out here (the headline on paper Table S7, the variance on the fixed store)."""

from __future__ import annotations

import statistics

import pytest

from hierconsole.factorial import HEADLINE_PAIRS
from hierconsole.levels import PAPER_CODES as LEVELS
from hierconsole.study import read
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.analysis.frames import analysis_frame
from hierconsole.study.analysis.headline import headline
from hierconsole.study.analysis.statistics import EVIDENCE_KEYS, evidence
from tests.paper_tables import SEEDS, per_seed_table
from tests.stores.fixed import COMPLETE, metric_value
from tests.stores.fixed import SEEDS as FIXED_SEEDS


def test_headline_is_the_difference_of_magnitudes_seed_by_seed():
    table = per_seed_table("S3")
    effects = simple_effects(table, "hier_mAP")
    rows = headline(effects)
    assert [(h.loss, h.geometry) for h in rows] == list(HEADLINE_PAIRS)
    cells = {(r["arm"], r["seed"]): r["hier_mAP"] for r in table.iter_rows(named=True)}
    for h in rows:
        expected = {}
        for s in SEEDS:
            er, hr, es, hs = (cells[(a, s)] for a in ("E_R", "H_R", "E_S", "H_S"))
            loss = {"loss_E": es - er, "loss_H": hs - hr}[h.loss]
            geom = {"geom_R": hr - er, "geom_S": hs - es}[h.geometry]
            expected[str(s)] = abs(loss) - abs(geom)
        assert h.per_unit == pytest.approx(expected, abs=1e-15)
        assert h.mean == pytest.approx(statistics.fmean(expected.values()), abs=1e-15)
        assert h.evidence == evidence(list(h.per_unit.values()))
        # On CUB the objective-family contrast is the larger in every seed: p at its three-seed floor.
        assert h.positive == 3 and h.evidence.p_signflip == 0.25 and h.evidence.resolved
    assert rows[0].name == "|loss_E| - |geom_R|"
    assert rows[0].definition == "|E_S - E_R| - |H_R - E_R|"
    doc = rows[0].to_json()
    assert list(doc)[-len(EVIDENCE_KEYS) :] == list(EVIDENCE_KEYS)


def test_headline_table_exports_every_metric():
    frame = analysis_frame("headline", per_seed_table("S3"))
    assert set(frame["metric"]) == set(simple_effects(per_seed_table("S3")))
    assert frame.columns[:3] == ["metric", "comparison", "definition"]
    assert frame.height == len(HEADLINE_PAIRS) * frame["metric"].n_unique()


def test_variance_components_of_the_fixed_study_match_a_loop(open_store):
    table = read.variance(open_store, COMPLETE)
    got = {(r["arm"], r["metric"]): r for r in table.iter_rows(named=True)}
    for arm in ("E_R", "H_S"):
        for level in LEVELS:
            groups = [[metric_value(arm, s, level, "mAP", p) for p in FIXED_SEEDS] for s in FIXED_SEEDS]
            means = [statistics.fmean(g) for g in groups]
            between = statistics.variance(means)
            within = statistics.fmean(statistics.variance(g) for g in groups)
            row = got[(arm, f"{level}_mAP")]
            assert row["between_seed_var"] == pytest.approx(between, rel=1e-9)
            assert row["within_seed_var"] == pytest.approx(within, rel=1e-9)
            assert row["seed_var"] == pytest.approx(max(0.0, between - within / 3), rel=1e-9, abs=1e-15)
            assert (row["n_seeds"], row["n_perturbations"]) == (3, 3)
    # The fixed values add 0.001 * (perturbation % 7) to each draw, so within a seed the Q/G variance is the
    # variance of those offsets (0, 0.001, 0.005 for Q/G seeds 42, 2024, 3407), for every arm and level.
    draws = [0.001 * (p % 7) for p in FIXED_SEEDS]
    assert got[("E_R", "leaf_mAP")]["within_seed_var"] == pytest.approx(statistics.variance(draws), rel=1e-6)
    assert "hier_mAP" in {m for _, m in got}
    assert read.table_frame(open_store, "variance", COMPLETE).equals(table)
