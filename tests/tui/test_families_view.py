"""The Families view on fixed data: members with phase and progress, and each declared contrast as the
domain computes it (or why it cannot be computed yet)."""

from __future__ import annotations

import json

from hierconsole.study.db.storage import Store
from hierconsole.study.read.contrasts import compare_studies
from tests.tui.conftest import SIZE, make_app, settle, shown
from tests.tui.fixtures import COMPLETE, LIVE


def _register_family(store: Store) -> None:
    definition = {
        "name": "fam",
        "contrasts": [
            {"name": "done - live", "a": "done", "b": "live", "arms": None},
            {"name": "done HS - done ES", "a": "done", "b": "again", "arms": "H_S:E_S"},
        ],
    }
    store.execute(
        "INSERT INTO families (family_id, name, definition, sha256) VALUES ('fam-1', 'fam', ?, 'x')",
        [json.dumps(definition)],
    )
    for i, (member, study) in enumerate((("done", COMPLETE), ("live", LIVE), ("again", COMPLETE))):
        store.execute(
            "INSERT INTO family_members VALUES ('fam-1', ?, ?, ?, ?)",
            [member, i, study, json.dumps({"geometry.poincare.c": i + 1})],
        )


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
                assert f"{row.positive_seeds}/{row.n_seeds}" in text
            assert "H_S − E_S" in text


async def test_families_view_without_a_family_says_how_to_make_one(open_store):
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await settle(pilot, app)
        assert "No family yet" in shown(app)
        assert "7 Families" in shown(app)
