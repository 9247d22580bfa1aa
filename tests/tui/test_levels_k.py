"""The console with a tree of any depth, driven with hand-made K-level results (no K-level home is
trained here): the redistribution view of a seven-level study at 80×24 cuts no number, the effects view's
level picker cycles the study's own levels, the live log line abridges a deep tree's levels."""

from __future__ import annotations

import polars as pl
import pytest

from hierconsole.present.levels import PAPER, level_choices, levels_in_columns
from hierconsole.styles import EFFECT_DIGITS
from hierconsole.tui.screens.effects import LEVEL_CHOICES
from hierconsole.tui.widgets.live import LEVELS_WIDTH, _level_maps
from hierconsole.vocabulary import hier_score
from tests.present.k_levels import INAT7, levels_k, redistribution_k
from tests.shown_numbers import assert_whole
from tests.stores.fixed import COMPLETE
from tests.tui.conftest import make_app, screen_text, settle
from tests.tui.test_widths import drawn


def test_three_levels_cycle_as_before():
    assert LEVEL_CHOICES == ("hier", "middle", "high", "leaf")
    assert level_choices(levels_in_columns(["leaf_mAP", "high_mAP", "hier_mAP", "leaf_R@1"])) == LEVEL_CHOICES
    assert levels_in_columns(["arm", "seed"]) == PAPER


@pytest.mark.parametrize("k", (2, 7, 12))
def test_the_picker_cycles_hier_the_hier_levels_then_the_leaf(k):
    levels = levels_k(k)
    columns = ["arm", "seed", *(f"{c}_{m}" for c in levels.codes for m in ("mAP", "R@1")), "hier_mAP"]
    assert level_choices(levels_in_columns(columns)) == ("hier", *levels.codes[1:], levels.codes[0])
    assert level_choices(levels, hier=levels.codes[2:]) == ("hier", *levels.codes[2:], levels.codes[1], levels.codes[0])


def _k_per_seed(levels) -> pl.DataFrame:
    rows = [
        {"arm": arm, "seed": s, **{f"{c}_mAP": 0.1 + 0.01 * i for i, c in enumerate(levels.codes)}, "hier_mAP": 0.2}
        for arm in ("E_R", "H_R", "E_S", "H_S")
        for s in (0, 1, 2)
    ]
    return pl.DataFrame(rows)


async def test_a_seven_level_redistribution_at_80x24_cuts_no_number(open_store):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await settle(pilot, app)
        screen = app.screen
        shown = screen._shown
        result = redistribution_k(INAT7)
        screen.post_message(
            screen.Loaded(shown.study_id, shown.progress, _k_per_seed(INAT7), shown.aggregations, shown.aggregation, result, ())
        )
        await settle(pilot, app)
        assert "…" not in screen_text(app)
        text, width, visible = drawn(app, "#content")
    words = []
    for by_level in result.contrasts.values():
        for e in by_level.values():
            words += [f"{e.mean:+.{EFFECT_DIGITS}f}", *(f"{v:+.{EFFECT_DIGITS}f}" for v in e.per_unit.values())]
    assert_whole(text, words, "seven-level redistribution view at 80x24")
    assert all(code in text for code in INAT7.codes)
    assert width <= visible


async def test_the_effects_picker_follows_a_seven_level_study(open_store):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await settle(pilot, app)
        screen = app.screen
        shown = screen._shown
        screen.post_message(
            screen.Loaded(shown.study_id, shown.progress, _k_per_seed(INAT7), shown.aggregations, shown.aggregation, None, ())
        )
        await pilot.pause()
        assert screen.level_choices == ("hier", *INAT7.codes[1:], "species")
        assert "…" not in screen_text(app)
        # The key moves to genus and reloads the study shown, which is three-level: a level it does not
        # have falls back to the hier score (the real seven-level picker: tests/e2e/test_deep_taxonomy.py).
        await pilot.press("m")
        await settle(pilot, app)
        assert screen.level_choices == ("hier", "middle", "high", "leaf")
        assert screen.selection.level == "hier"
        assert "…" not in screen_text(app)


async def test_the_effects_picker_follows_the_declared_hier_levels(open_store):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await settle(pilot, app)
        screen = app.screen
        shown = screen._shown
        hier = ("family", "kingdom")  # evaluation.hier_levels: averaged first, then the others, the leaf last
        screen.post_message(
            screen.Loaded(
                shown.study_id, shown.progress, _k_per_seed(INAT7), shown.aggregations, shown.aggregation, None, (), hier
            )
        )
        await pilot.pause()
        assert screen.level_choices == ("hier", "family", "kingdom", "genus", "order", "class", "phylum", "species")


def test_the_live_line_abridges_a_deep_tree():
    three = {"leaf": {"mAP": 0.5}, "middle": {"mAP": 0.4}, "high": {"mAP": 0.3}}
    assert _level_maps(dict(reversed(three.items()))) == "mAP leaf 0.500, middle 0.400, high 0.300"
    seven = {c: {"mAP": 0.1 * (i + 1)} for i, c in enumerate(INAT7.codes)}
    hier = hier_score({c: v["mAP"] for c, v in seven.items()}, hier=INAT7.codes[1:])
    assert _level_maps(seven) == f"mAP hier {hier:.3f}, kingdom 0.700, species 0.100 (of 7 levels)"
    four = {c: {"mAP": 0.5} for c in ("a", "b", "c", "d")}
    line = _level_maps(four)
    assert line == "mAP a 0.500, b 0.500, c 0.500, d 0.500" and len(line) <= LEVELS_WIDTH + 4
