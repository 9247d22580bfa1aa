"""Contrasts across studies on plain per-seed tables: pairing by seed, dropped seeds, levels, SD rules."""

from __future__ import annotations

import json

import polars as pl
import pytest

from hierconsole.errors import HierconsoleError
from hierconsole.study.analysis.contrasts import (
    as_one_family,
    contrast_tables,
    contrasts_frame,
    parse_arm_pair,
)
from hierconsole.study.analysis.statistics import EVIDENCE_KEYS, equivalence, evidence


def _table(arms: dict[str, dict[int, float]], metric: str = "mAP") -> pl.DataFrame:
    rows = []
    for arm, by_seed in arms.items():
        for seed, base in by_seed.items():
            row = {"arm": arm, "seed": seed}
            for i, level in enumerate(("leaf", "middle", "high")):
                row[f"{level}_{metric}"] = base + 0.1 * i
            if metric == "mAP":
                row["hier_mAP"] = (row["middle_mAP"] + row["high_mAP"]) / 2
            rows.append(row)
    return pl.DataFrame(rows)


def test_pairs_by_seed_and_reports_the_dropped_ones():
    a = _table({"E_S": {1: 0.50, 2: 0.40, 3: 0.30}, "H_S": {1: 0.6, 2: 0.6, 3: 0.6}})
    b = _table({"E_S": {2: 0.45, 3: 0.20, 4: 0.9}})
    result = contrast_tables(a, b, a="A", b="B")
    assert [(r.arm_a, r.arm_b, r.level) for r in result.rows] == [("E_S", "E_S", lv) for lv in ("leaf", "middle", "high", "hier")]
    leaf = result.rows[0]
    assert leaf.per_unit == pytest.approx({2: -0.05, 3: 0.10})
    assert leaf.mean == pytest.approx(0.025)
    assert leaf.sd == pytest.approx(((0.075**2 + 0.075**2) / 1) ** 0.5)
    assert (leaf.positive, leaf.n) == (1, 2)
    assert result.dropped == {"a": [1], "b": [4]}
    assert result.dropped_text() == "dropped seed(s) 1 only in A; seed(s) 4 only in B"
    doc = json.loads(json.dumps(result.to_json()))
    assert set(doc) == {"metric", "a", "b", "rows"} and doc["metric"] == "hier_mAP"
    assert doc["rows"][0]["per_seed"] == pytest.approx({"2": -0.05, "3": 0.10})


def test_one_seed_has_no_sd_and_recall_has_no_hier_row():
    a = _table({"H_R": {7: 0.3}}, metric="R@1")
    b = _table({"E_R": {7: 0.1}}, metric="R@1")
    result = contrast_tables(a, b, a="A", b="B", metric="R@1", arms=[("H_R", "E_R")])
    assert [r.level for r in result.rows] == ["leaf", "middle", "high"]
    assert all(r.sd is None and r.n == 1 for r in result.rows)
    assert result.to_json()["rows"][0]["sd"] is None
    frame = contrasts_frame([result])
    assert frame.columns[:7] == ["contrast", "a", "b", "arm_a", "arm_b", "level", "metric"]
    assert frame["seed_7"].to_list() == pytest.approx([0.2, 0.2, 0.2])
    assert frame["metric"].to_list() == ["leaf_R@1", "middle_R@1", "high_R@1"]
    assert [r["metric"] for r in result.to_json()["rows"]] == ["leaf_R@1", "middle_R@1", "high_R@1"]


def test_refusals_name_what_is_wrong():
    a = _table({"H_R": {1: 0.3}})
    b = _table({"E_R": {2: 0.1}})
    with pytest.raises(HierconsoleError, match="no arm in both"):
        contrast_tables(a, b, a="A", b="B")
    with pytest.raises(HierconsoleError, match="share no training seed"):
        contrast_tables(a, b, a="A", b="B", arms=[("H_R", "E_R")])
    with pytest.raises(HierconsoleError, match="B has no arm H_S"):
        contrast_tables(a, b, a="A", b="B", arms=[("H_R", "H_S")])
    with pytest.raises(HierconsoleError, match="not a contrast metric"):
        contrast_tables(a, b, a="A", b="B", metric="accuracy")
    assert parse_arm_pair("hs:ER") == ("H_S", "E_R")
    with pytest.raises(HierconsoleError, match="expected ARM_A:ARM_B"):
        parse_arm_pair("H_S")


def test_contrast_rows_carry_the_intervals_and_tests_in_json_and_frames():
    a = _table({"E_S": {1: 0.50, 2: 0.42, 3: 0.47, 4: 0.44}})
    b = _table({"E_S": {1: 0.40, 2: 0.41, 3: 0.36, 4: 0.30}})
    result = contrast_tables(a, b, a="A", b="B")
    row = result.rows[0]
    values = [row.per_unit[s] for s in sorted(row.per_unit)]
    assert row.evidence == evidence(values)
    assert row.evidence.p_signflip == 2 / 16  # four positive seeds: the floor of four
    doc = result.to_json()["rows"][0]
    assert list(doc)[-len(EVIDENCE_KEYS) :] == list(EVIDENCE_KEYS)
    assert (doc["ci95_t_lo"], doc["ci95_t_hi"]) == row.evidence.ci95_t
    assert (doc["ci95_boot_lo"], doc["ci95_boot_hi"]) == row.evidence.ci95_boot
    frame = contrasts_frame([result])
    assert frame.columns[-len(EVIDENCE_KEYS) :] == list(EVIDENCE_KEYS)
    assert frame.row(0, named=True)["seeds_to_resolve"] == row.evidence.seeds_to_resolve


def test_a_metric_of_the_whole_tree_contrasts_in_one_row_per_arm_pair():
    from hierconsole.study.analysis.contrasts import contrast_caption, contrast_tables, metric_columns

    def table(offset: float) -> pl.DataFrame:
        rows = [{"arm": arm, "seed": s, "leaf_mAP": 0.5, "H-AP": 0.1 * i + offset + 0.01 * s} for i, arm in enumerate(("E_R", "H_S")) for s in (1, 2)]
        return pl.DataFrame(rows)

    assert metric_columns("H-AP") == {"hierarchy": "H-AP"}
    assert contrast_caption("mistake_severity@1") == "mistake_severity@1 of the whole tree"
    got = contrast_tables(table(0.3), table(0.1), a="A", b="B", metric="H-AP")
    assert [(r.arm_a, r.level) for r in got.rows] == [("E_R", "hierarchy"), ("H_S", "hierarchy")]
    for r in got.rows:
        assert r.mean == pytest.approx(0.2, abs=1e-12)
    assert got.to_json()["rows"][0]["metric"] == "H-AP"


def test_contrasts_as_one_family_are_one_family_each_row_with_its_tost():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    a = _table({"E_S": {1: 0.50, 2: 0.42, 3: 0.47, 4: 0.44}, "H_S": {1: 0.51, 2: 0.43, 3: 0.45, 4: 0.47}})
    b = _table({"E_S": {1: 0.40, 2: 0.41, 3: 0.36, 4: 0.30}, "H_S": {1: 0.50, 2: 0.44, 3: 0.46, 4: 0.45}})
    first = contrast_tables(a, b, a="A", b="B", arms=[("E_S", "E_S")], name="one")
    second = contrast_tables(a, b, a="A", b="B", arms=[("H_S", "H_S")], name="two")
    together = as_one_family([first, second], "family F", sesoi=0.02)
    rows = [r for c in together for r in c.rows]
    assert len(rows) == 8  # 2 contrasts x 4 levels, all in one family
    p = [r.evidence.p_signflip for r in rows]
    for r, holm_p, bh_p in zip(rows, multipletests(p, method="holm")[1], multipletests(p, method="fdr_bh")[1], strict=True):
        assert r.adjusted is not None and r.adjusted.family == "family F"
        assert (r.adjusted.p_holm, r.adjusted.p_bh) == pytest.approx((holm_p, bh_p), rel=1e-12)
        assert r.evidence.equivalence == equivalence(list(r.per_unit.values()), 0.02)
    # E_S differs by ~0.09: different; H_S by ~0.0025 with a small spread: not shown different.
    assert together[0].rows[0].evidence.equivalence.verdict == "different"
    assert together[1].rows[0].evidence.equivalence.verdict in ("equivalent", "inconclusive")
    frame = contrasts_frame(together)
    assert frame["family"].unique().to_list() == ["family F"] and frame["sesoi"].unique().to_list() == [0.02]
