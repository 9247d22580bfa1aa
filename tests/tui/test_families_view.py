"""The Families view on fixed data: members with phase and progress, and each declared contrast as the
domain computes it (or why it cannot be computed yet)."""

from __future__ import annotations

import json

import pytest

from hierconsole.study.db.storage import Store
from hierconsole.study.read.contrasts import compare_studies
from hierconsole.styles import EFFECT_DIGITS
from tests.shown_numbers import assert_whole, effect_words
from tests.stores.fixed import COMPLETE, LIVE, add_family
from tests.tui.conftest import SIZE, make_app, settle, shown
from tests.tui.test_widths import drawn


def _register_family(store: Store) -> None:
    contrasts = [
        {"name": "done - live", "a": "done", "b": "live", "arms": None},
        {"name": "done HS - done ES", "a": "done", "b": "again", "arms": "H_S:E_S"},
    ]
    members = {m: (study, {"geometry.poincare.c": i + 1}) for i, (m, study) in enumerate((("done", COMPLETE), ("live", LIVE), ("again", COMPLETE)))}
    assert add_family(store, "fam", members, contrasts) == "fam-1"


async def test_families_view_shows_members_and_contrasts(fixed_copy):
    with Store(fixed_copy) as store:
        _register_family(store)
        expected = compare_studies(store, COMPLETE, COMPLETE, arms=[("H_S", "E_S")])
        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=(120, 60)) as pilot:
            await pilot.press("7")
            await settle(pilot, app)
            text = shown(app)
            assert "fam fam-1 · 2/3 members complete" in text
            assert "done complete" in text and "live training" in text and "c=1" in text
            # The live member is not locked yet: the view says so instead of a number.
            assert f"done - live: study {LIVE} is not locked" in text
            for row in expected.rows:
                assert f"{row.mean:+.6f} ± {row.sd:.6f}" in text, row
                assert f"{row.positive}/{row.n}" in text
            assert "H_S − E_S" in text


async def test_families_view_without_a_family_says_how_to_make_one(open_store):
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await settle(pilot, app)
        assert "No family yet" in shown(app)
        assert "7 Families" in shown(app)


@pytest.mark.parametrize("size", [(60, 20), (80, 24), (120, 40), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_families_view_shows_every_contrast_number_whole(fixed_copy, size):
    """The paper's contrasts at every terminal size: each mean, SD, per-seed value and interval whole."""
    with Store(fixed_copy) as store:
        _register_family(store)
        expected = compare_studies(store, COMPLETE, COMPLETE, arms=[("H_S", "E_S")])
        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=size) as pilot:
            await pilot.press("7")
            await settle(pilot, app)
            text, width, visible = drawn(app, "#family")
    words = [w for row in expected.to_json()["rows"] for w in effect_words(row, EFFECT_DIGITS)]
    assert_whole(text, words, f"families view at {size}")
    assert width <= visible


def _register_outer_family(store: Store) -> None:
    """Two outer 'splits' over the complete study (so each split's value is the same) and one live."""
    members = {"s1": (COMPLETE, {}), "s2": (COMPLETE, {}), "s3": (LIVE, {})}
    add_family(store, "outer", members, [])
    outer = {
        "splits": ["s1", "s2", "s3"],
        "configurations": [],
        "members": {m: [m, None] for m in members},
        "arms": [
            {"name": "es", "label": "Taxonomy-SupCon", "configuration": None, "arm": "E_S"},
            {"name": "hs", "label": "hyperbolic SupCon", "configuration": None, "arm": "H_S"},
        ],
        "gains": [{"name": "hs - es", "a": "hs", "b": "es"}],
    }
    definition = {"name": "outer", "base": "demo", "members": {}, "contrasts": [], "outer": outer}
    store.execute("UPDATE families SET definition = ? WHERE family_id = 'outer-1'", [json.dumps(definition)])


async def test_families_view_shows_an_outer_split_familys_arms_once_complete(fixed_copy):
    from hierconsole.study.read.families import family_outer_arms

    with Store(fixed_copy) as store:
        _register_outer_family(store)
        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=(160, 60)) as pilot:
            await pilot.press("7")
            await settle(pilot, app)
            text = shown(app)
            assert "arms over outer splits: shown once every member is complete (s3 not yet)" in text
        store.execute("DELETE FROM family_members WHERE member = 's3'")
        definition = json.loads(store.one("SELECT definition FROM families")[0])
        definition["outer"] = {**definition["outer"], "splits": ["s1", "s2"], "members": {"s1": ["s1", None], "s2": ["s2", None]}}
        store.execute("UPDATE families SET definition = ?", [json.dumps(definition)])
        _, view = family_outer_arms(store, "outer")
        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=(160, 60)) as pilot:
            await pilot.press("7")
            await settle(pilot, app)
            text = shown(app)
    assert "arms per outer split" in text and "paired gains per outer split" in text
    assert "Taxonomy-SupCon" in text and "hs - es" in text
    es = view.arm("es", "hier_mAP")
    assert es.sd == 0.0 and f"{es.mean:.4f} ± 0.0000" in text
    gain = next(g for g in view.gains if g.metric == "hier_mAP")
    assert f"{gain.mean:+.6f} ± 0.000000" in text
