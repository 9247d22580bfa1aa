"""The factorial as data: the paper's 2 × 2 effects pinned, any G × L against hand-written loops."""

from __future__ import annotations

import itertools
import random

import pytest

from hierconsole.factorial import (
    BASELINE_EFFECTS,
    CONTRASTS,
    EFFECTS,
    HEADLINE_PAIRS,
    PAPER,
    REDISTRIBUTION_CONTRASTS,
    Average,
    Factorial,
    arm_codes,
    arms_in_order,
    headline_pairs,
)


def test_the_papers_effects_are_as_they_always_were():
    assert EFFECTS == {
        "geom_R": "H_R - E_R",
        "geom_S": "H_S - E_S",
        "loss_E": "E_S - E_R",
        "loss_H": "H_S - H_R",
        "interaction": "(H_S - E_S) - (H_R - E_R)",
    }
    assert PAPER.arms == ("E_R", "H_R", "E_S", "H_S")
    assert list(CONTRASTS) == list(PAPER.contrasts)  # no main effect in the paper's 2 × 2
    assert REDISTRIBUTION_CONTRASTS == ("geom_S", "geom_R")
    assert HEADLINE_PAIRS == (("loss_E", "geom_R"), ("loss_E", "geom_S"), ("loss_H", "geom_R"), ("loss_H", "geom_S"))
    assert BASELINE_EFFECTS["E_S_vs_frozen"] == "E_S - frozen" and len(BASELINE_EFFECTS) == 12
    assert CONTRASTS["interaction"].sql() == '("H_S" - "E_S") - ("H_R" - "E_R")'
    assert Factorial.of_arms(["H_S", "frozen", "E_R", "pca", "H_R", "E_S"]) == PAPER


def _random_arms(factorial: Factorial) -> dict[str, float]:
    rng = random.Random(7)
    return {arm: rng.random() for arm in factorial.arms}


def test_every_contrast_of_a_three_by_three_matches_hand_loops():
    f = Factorial.of_arms(f"{g}_{o}" for g in "LEH" for o in "FRS")
    assert f.geometries == ("E", "H", "L") and f.objectives == ("R", "S", "F")  # the components' order
    assert f.arms[:3] == ("E_R", "H_R", "L_R")
    v = _random_arms(f)
    expected: dict[str, float] = {}
    for o in f.objectives:
        for a, b in itertools.combinations(f.geometries, 2):
            expected[f"geom_{o}:{b}-{a}"] = v[f"{b}_{o}"] - v[f"{a}_{o}"]
    for g in f.geometries:
        for p, q in itertools.combinations(f.objectives, 2):
            expected[f"loss_{g}:{q}-{p}"] = v[f"{g}_{q}"] - v[f"{g}_{p}"]
    for a, b in itertools.combinations(f.geometries, 2):
        for p, q in itertools.combinations(f.objectives, 2):
            expected[f"interaction:{b}-{a}:{q}-{p}"] = (v[f"{b}_{q}"] - v[f"{a}_{q}"]) - (v[f"{b}_{p}"] - v[f"{a}_{p}"])
    for a, b in itertools.combinations(f.geometries, 2):
        expected[f"geom:{b}-{a}"] = sum(v[f"{b}_{o}"] - v[f"{a}_{o}"] for o in f.objectives) / 3
    for p, q in itertools.combinations(f.objectives, 2):
        expected[f"loss:{q}-{p}"] = sum(v[f"{g}_{q}"] - v[f"{g}_{p}"] for g in f.geometries) / 3
    assert list(f.contrasts) == list(expected)  # names and display order
    assert len(f.contrasts) == 9 + 9 + 9 + 3 + 3
    for name, c in f.contrasts.items():
        assert c.value(v) == pytest.approx(expected[name], abs=1e-15), name
    assert isinstance(f.contrasts["geom:L-E"], Average)
    assert f.effects["geom:L-E"] == "mean(L_R - E_R, L_S - E_S, L_F - E_F)"
    assert len(f.headline_pairs) == 81 and f.headline_pairs[0] == ("loss_E:S-R", "geom_R:H-E")
    assert f.redistribution_contrasts[:3] == ("geom_S:H-E", "geom_S:L-E", "geom_S:L-H")  # under SupCon first


def test_a_factor_of_two_keeps_the_short_names_and_a_factor_of_one_has_no_contrast():
    f = Factorial.of_arms(["E_R", "L_R", "E_F", "L_F"])
    assert f.effects == {
        "geom_R": "L_R - E_R",
        "geom_F": "L_F - E_F",
        "loss_E": "E_F - E_R",
        "loss_L": "L_F - L_R",
        "interaction": "(L_F - E_F) - (L_R - E_R)",
    }
    three = Factorial.of_arms(["E_R", "H_R", "L_R"])
    assert list(three.effects) == ["geom_R:H-E", "geom_R:L-E", "geom_R:L-H"]  # no main effect over one level
    assert headline_pairs(three.effects) == ()


def test_arms_of_ones_own_components_and_misspellings():
    assert arm_codes("E_SoftCE") == ("E", "SoftCE")
    assert arm_codes("Sphere_S") == ("Sphere", "S")
    for wrong in ("E_RR", "X_Q", "R_E", "frozen", "ER", "E_", "_R", "E_R_S", "E_r"):
        assert arm_codes(wrong) is None, wrong
    f = Factorial.of_arms(["E_Zeta", "E_Alpha", "E_S"])
    assert f.objectives == ("S", "Alpha", "Zeta")  # built-ins first, then one's own by code
    assert arms_in_order(["pca", "E_Zeta", "frozen", "E_S", "nonsense"]) == ("E_S", "E_Zeta", "frozen", "pca")


def test_a_study_of_some_of_the_papers_cells_is_read_as_the_papers_factorial():
    assert Factorial.spanned(["E_S"]) == PAPER  # its effects are omitted, named as the paper names them
    assert Factorial.spanned(["E_R", "H_R", "frozen"]) == PAPER
    assert Factorial.spanned(["E_R", "L_R"]) == Factorial(("E", "L"), ("R",))


def test_the_legend_names_every_code_of_the_factorial():
    assert PAPER.legend == "arms: E = Euclidean, H = Poincaré (hyperbolic) geometry; R = regression, S = Taxonomy-SupCon loss"
    three = Factorial(("E", "H", "L"), ("R", "S", "C", "LeafMargin"))
    assert three.legend == (
        "arms: E = Euclidean, H = Poincaré (hyperbolic), L = Lorentz (hyperboloid) geometry; "
        "R = regression, S = Taxonomy-SupCon, C = soft-label CE, LeafMargin = LeafMargin loss"
    )
