"""`[factorial]` in a preset: the paper's 2 × 2 by default (and hashed as before), any G × L of built-ins or
one's own, the cells following the factorial, every problem in one line naming the option."""

from __future__ import annotations

import pytest

from hierconsole.config import load_preset
from hierconsole.errors import ConfigError
from hierconsole.factorial import PAPER, Factorial

DEMO = load_preset("demo")
THREE = {
    "factorial.geometries": ["euclidean", "poincare", "lorentz"],
    "factorial.losses": ["regression", "supcon", "flat_supcon"],
    "temperature.others": 0.2,
}


def _problem(values: dict) -> str:
    with pytest.raises(ConfigError) as err:
        DEMO.with_overrides(values=values)
    return str(err.value)


def test_the_paper_factorial_is_the_default_and_writing_it_out_changes_no_hash():
    assert DEMO.design == PAPER and DEMO.cells == PAPER.arms
    assert "factorial" not in DEMO.to_dict()
    spelled = DEMO.with_overrides(values={"factorial.geometries": ["euclidean", "poincare"], "factorial.losses": ["regression", "supcon"]})
    assert spelled.sha256() == DEMO.sha256()


def test_a_three_by_three_trains_every_arm_and_records_its_factorial():
    p = DEMO.with_overrides(values=THREE)
    assert p.design == Factorial(("E", "H", "L"), ("R", "S", "F"))
    assert p.cells == ("E_R", "H_R", "L_R", "E_S", "H_S", "L_S", "E_F", "H_F", "L_F")
    assert p.to_dict()["factorial"] == {"geometries": ["euclidean", "poincare", "lorentz"], "losses": ["regression", "supcon", "flat_supcon"]}
    assert p.sha256() != DEMO.sha256()
    again = type(p).from_dict(p.to_dict(), recorded=True)
    assert again == p and again.sha256() == p.sha256()
    g, o = p.factorial.cell("L_F")
    assert (g.name, o.name) == ("lorentz", "flat_supcon")
    # A subset of cells, written in any order, keeps the factorial's order.
    subset = p.with_overrides(values={"training.cells": ["L_F", "E_R"]})
    assert subset.cells == ("E_R", "L_F")


def test_tuning_follows_the_geometries_whose_cells_take_a_temperature():
    p = DEMO.with_overrides(values={**THREE, "temperature.others": "tune", "temperature.euclidean": "tune"})
    assert p.tuned_geometries == ("euclidean", "lorentz")
    assert p.tuning_cell("lorentz") == "L_S"
    only_flat = p.with_overrides(values={"training.cells": ["L_R", "L_F", "E_R"]})
    assert only_flat.tuned_geometries == ("lorentz",) and only_flat.tuning_cell("lorentz") == "L_F"
    # Regression cells take no temperature: a geometry of regression cells alone needs none.
    plain = DEMO.with_overrides(values={"factorial.geometries": ["lorentz"], "factorial.losses": ["regression"]})
    assert plain.cells == ("L_R",) and plain.tuned_geometries == ()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"factorial.geometries": ["euclidean", "spherical"]}, "factorial.geometries = [\"euclidean\", \"spherical\"] (an array): unknown geometry 'spherical'"),
        ({"factorial.geometries": ["euclidean", "euclidean"]}, "names repeat"),
        ({"factorial.geometries": []}, "expected 1 to 6 distinct geometry names"),
        ({"factorial.losses": ["regression", "a:Soft", "b:Soft"]}, "arm codes repeat (R, Soft, Soft)"),
        ({"factorial.losses": ["regression", "mine:CE"]}, "arm code 'CE'"),
        ({"factorial.geometries": ["lorentz"]}, "temperature.others: needed by the lorentz cells L_S; set it to a number or 'tune'"),
        ({"training.cells": ["E_R", "L_S"]}, "training.cells = [\"E_R\", \"L_S\"]: L_S is not an arm of the factorial; its arms are E_R, H_R, E_S, H_S"),
        ({"training.cells": ["E_RR"]}, "item 0 = \"E_RR\" (a string): expected an arm name: a geometry code, '_' and an objective code"),
    ],
)
def test_bad_factorials_are_refused_naming_the_option(values, expected):
    assert expected in _problem(values)
