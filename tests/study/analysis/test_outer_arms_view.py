"""The arms-over-outer-splits computation on tables written by hand (no training): a level missing on
one split is left out and named, a family without [configurations] has one member per split."""

from __future__ import annotations

import polars as pl
import pytest

from hierconsole.config.family import load_family
from hierconsole.errors import ConfigError, HierconsoleError
from hierconsole.study.analysis.outer_arms import outer_arms_frame, outer_arms_view, outer_gains_frame

OUTER = {
    "splits": ["a", "b", "c"],
    "configurations": [],
    "members": {"a": ["a", None], "b": ["b", None], "c": ["c", None]},
    "arms": [
        {"name": "frozen", "label": "Frozen", "configuration": None, "arm": "frozen"},
        {"name": "sup", "label": "SupCon", "configuration": None, "arm": "E_S"},
    ],
    "gains": [{"name": "sup - frozen", "a": "sup", "b": "frozen"}],
}


def _table(frozen: float, sup: tuple[float, float], high: float | None) -> pl.DataFrame:
    rows = [
        {"arm": "E_S", "seed": 1, "middle_mAP": sup[0], "high_mAP": high, "hier_mAP": sup[0]},
        {"arm": "E_S", "seed": 2, "middle_mAP": sup[1], "high_mAP": high, "hier_mAP": sup[1]},
        {"arm": "frozen", "seed": -1, "middle_mAP": frozen, "high_mAP": high, "hier_mAP": frozen},
    ]
    return pl.DataFrame(rows, schema={"arm": pl.String, "seed": pl.Int64, **dict.fromkeys(("middle_mAP", "high_mAP", "hier_mAP"), pl.Float64)})


def test_values_by_hand_and_a_level_missing_on_one_split_left_out():
    tables = {"a": _table(0.25, (0.5, 0.75), 0.1), "b": _table(0.5, (0.5, 0.5), None), "c": _table(0.0, (1.0, 0.5), 0.2)}
    view = outer_arms_view("fam", OUTER, tables, metrics=("leaf_mAP", "middle_mAP", "high_mAP"))
    assert view.metrics == ("middle_mAP",) and view.omitted == ("leaf_mAP", "high_mAP")
    sup = view.arm("sup", "middle_mAP")
    assert sup.per_unit == {"a": 0.625, "b": 0.5, "c": 0.75}
    assert sup.seeds == {"a": 2, "b": 2, "c": 2}
    assert sup.mean == pytest.approx(0.625, abs=1e-15) and sup.sd == pytest.approx(0.125, abs=1e-15)
    frozen = view.arm("frozen", "middle_mAP")
    assert frozen.per_unit == {"a": 0.25, "b": 0.5, "c": 0.0} and frozen.seeds == {"a": 1, "b": 1, "c": 1}
    [gain] = view.gains
    assert gain.per_unit == {"a": 0.375, "b": 0.0, "c": 0.75}
    assert gain.mean == pytest.approx(0.375, abs=1e-15) and gain.sd == pytest.approx(0.375, abs=1e-15)
    assert (gain.positive, gain.n) == (2, 3)  # zero is not positive
    assert outer_arms_frame(view).columns[:8] == ["name", "label", "arm", "configuration", "metric", "a", "b", "c"]
    assert outer_gains_frame(view).row(0, named=True)["positive_splits"] == 2
    doc = view.to_json()
    assert doc["omitted"] == ["leaf_mAP", "high_mAP"] and doc["gains"]["sup - frozen"]["metrics"]["middle_mAP"]["n_splits"] == 3


def test_a_member_without_its_arm_is_named():
    tables = {"a": _table(0.25, (0.5, 0.75), 0.1), "b": _table(0.5, (0.5, 0.5), 0.1).filter(pl.col("arm") != "E_S"), "c": _table(0.0, (1.0, 0.5), 0.2)}
    with pytest.raises(HierconsoleError, match=r"member b has no results for arm E_S \(it has frozen\)"):
        outer_arms_view("fam", OUTER, tables)


FAMILY = """\
[family]
name = "plain"
base = "demo"

[splits.one]
"split.seed" = 1

[splits.two]
"split.seed" = 2

[[arms]]
name = "hs"
arm = "H_S"

[[arms]]
name = "es"
arm = "E_S"
{extra}
[[gains]]
a = "hs"
b = "es"
"""


def test_splits_without_configurations_make_one_member_per_split(tmp_path):
    path = tmp_path / "plain.toml"
    path.write_text(FAMILY.format(extra=""))
    family = load_family(path)
    assert [m.name for m in family.members] == ["one", "two"]
    assert family.outer is not None and [g.name for g in family.outer.gains] == ["hs - es"]
    path.write_text(FAMILY.format(extra='configuration = "x"\n') + '\n[splits.mean]\n"split.seed" = 3\n')
    with pytest.raises(ConfigError) as info:
        load_family(path)
    assert "arms[1].configuration: the family has no [configurations]" in str(info.value)
    assert "splits.mean: 'mean' names a column" in str(info.value)
    path.write_text(FAMILY.format(extra="").split("[splits.one]")[0] + '[[arms]]\nname = "x"\narm = "E_S"\n')
    with pytest.raises(ConfigError, match=r"need \[splits.NAME\] tables"):
        load_family(path)
