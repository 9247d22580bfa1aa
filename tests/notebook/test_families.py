"""A family read from a notebook: its members, its declared contrasts, contrasts of any two members and
the pooled effects, each equal to the CLI's JSON on a real family run headless."""

from __future__ import annotations

import json

import pytest

import hierconsole as hc
from hierconsole.errors import HierconsoleError
from tests.homes import FAMILY, copy_home
from tests.notebook.cli_reference import (
    SUMMARY_KEYS,
    assert_long_equals,
    assert_summary_equals,
    cli,
    cli_json,
    effect_entries,
    table_cells,
)

pytestmark = pytest.mark.slow  # a family of two studies trained by worker processes

CONTRAST_KEYS = ("contrast", "arm_a", "arm_b", "level")


@pytest.fixture(scope="module")
def family_home(tmp_path_factory, trained_family):
    """The session's family (tests/homes.py), this module's own copy."""
    return copy_home(trained_family.home, tmp_path_factory.mktemp("nbfamily") / "home")


def _contrast_entries(contrasts: list[dict]) -> dict[tuple, dict]:
    return {
        (c.get("name") or f"{c['a']} - {c['b']}", r["arm_a"], r["arm_b"], r["level"]): r
        for c in contrasts
        for r in c["rows"]
    }


def test_the_family_is_its_members_as_families_lists_them(family_home):
    home = hc.open_home(family_home)
    members = home.family(FAMILY)
    assert members["member"].to_list() == ["flat", "curved"]
    assert set(members["phase"]) == {"complete"}
    out = cli(family_home, "--wide", "families", FAMILY).stdout
    for m in members.iter_rows(named=True):
        (cells,) = [c for c in map(table_cells, out.splitlines()) if m["study_id"] in c]
        assert cells[:2] == [m["member"], m["study_id"]] and f"{m['jobs_finished']}/{m['jobs']}" in cells
        assert json.loads(m["overrides"]) == {"geometry.poincare.c": 0.5 if m["member"] == "flat" else 2.0}
    assert home.families().equals(members)


def test_declared_contrasts_are_those_of_contrast_family_json(family_home):
    home = hc.open_home(family_home)
    doc = cli_json(family_home, "contrast", FAMILY, "--json")
    expected = _contrast_entries(doc["contrasts"])
    assert_long_equals(home.contrast(FAMILY), expected, CONTRAST_KEYS)
    assert_summary_equals(home.contrast(FAMILY, summary=True), expected, CONTRAST_KEYS)
    # R@K contrasts: the three levels, no hier row, as in the CLI.
    doc = cli_json(family_home, "contrast", FAMILY, "--json", "--metric", "R@1")
    long = home.contrast(FAMILY, metric="R@1")
    assert "hier" not in set(long["level"])
    assert_long_equals(long, _contrast_entries(doc["contrasts"]), CONTRAST_KEYS)


@pytest.mark.parametrize("arms", [None, "H_S:E_S"])
def test_a_contrast_of_two_members_is_that_of_contrast_a_b_json(family_home, arms):
    home = hc.open_home(family_home)
    flags = ["--arms", arms] if arms else []
    doc = cli_json(family_home, "contrast", f"{FAMILY}:curved", f"{FAMILY}:flat", "--json", *flags)
    long = home.contrast(f"{FAMILY}:curved", f"{FAMILY}:flat", arms=arms)
    assert_long_equals(long, _contrast_entries([doc]), CONTRAST_KEYS)
    assert set(long["seed"]) == {42, 2024}
    if arms:
        assert set(zip(long["arm_a"], long["arm_b"], strict=True)) == {("H_S", "E_S")}


def test_pooled_effects_are_those_of_effects_family_json(family_home):
    home = hc.open_home(family_home)
    doc = cli_json(family_home, "effects", FAMILY, "--json")
    expected = {(name,): e for name, e in doc["effects"].items()}
    counts = ("positive_members", "n_members")
    keys = tuple(k for k in SUMMARY_KEYS if k not in ("positive_seeds", "n_seeds")) + counts
    long = home.family_effects(FAMILY)
    assert set(long["member"]) == {"flat", "curved"}
    assert_long_equals(long, expected, ("effect",), unit="member", summary_keys=keys, per_unit="per_member")
    assert_summary_equals(home.family_effects(FAMILY, summary=True), expected, ("effect",), summary_keys=keys)


def test_a_member_reads_as_a_study_and_the_family_name_says_what_it_is(family_home):
    home = hc.open_home(family_home)
    study = home.family(FAMILY).filter(member="curved")["study_id"].item()
    doc = cli_json(family_home, "effects", study, "--json")
    assert_long_equals(home.effects(f"{FAMILY}:curved"), effect_entries(doc), ("group", "metric", "effect"))
    with pytest.raises(HierconsoleError, match="is a family"):
        home.effects(FAMILY)
    with pytest.raises(HierconsoleError, match="arms= applies"):
        home.contrast(FAMILY, arms="H_S:E_S")
