"""Every analysis view of the console at 60, 80, 120 and 200 columns, as the Pilot draws it: the view's
content, laid out for the view's width, holds every number of the read layer whole (effects with their
intervals and tests, H − E per level and seed, audits' evidence), and the visible screen cuts nothing
with an ellipsis and nothing wider than the view (so no number is clipped at its right edge)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from hierconsole.study.analysis.audits.result import Check
from hierconsole.study.analysis.redistribution import redistribution
from hierconsole.study.read import per_seed, stored_audits
from hierconsole.study.read.effects import study_effects
from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS
from tests.shown_numbers import assert_whole, effect_words, plain
from tests.stores.fixed import COMPLETE
from tests.tui.conftest import make_app, screen_text, settle

SIZES = [(60, 20), (80, 24), (120, 40), (200, 60)]


def drawn(app, widget_id: str) -> tuple[str, int, int]:
    """The widget's content drawn at the widget's width, and the two widths (content, view)."""
    widget = app.screen.query_one(widget_id)
    console = Console(width=widget.size.width, file=io.StringIO(), record=True, color_system=None)
    console.print(widget.content)
    view = app.screen.query_one("#scroll").size.width
    return console.export_text(), widget.size.width, view


async def _view(open_store, size, key, widget_id):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=size) as pilot:
        await pilot.press(key)
        await settle(pilot, app)
        assert "…" not in screen_text(app)
        return drawn(app, widget_id)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_effects_view_shows_every_number_whole(open_store, size):
    view = study_effects(open_store, COMPLETE, ["hier_mAP"])
    text, width, visible = await _view(open_store, size, "3", "#content")
    words = [plain(r["mean"], ARM_DIGITS) for r in view.arms.to_dicts()]
    words += [w for e in view.to_json()["effects"]["hier_mAP"].values() for w in effect_words(e, EFFECT_DIGITS)]
    assert_whole(text, words, f"effects view at {size}")
    assert width <= visible, "laid out for the view: nothing scrolls off its right edge"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_redistribution_view_shows_every_value_whole(open_store, size):
    result = redistribution(per_seed(open_store, COMPLETE), "mAP")
    text, width, visible = await _view(open_store, size, "5", "#content")
    words = []
    for by_level in result.contrasts.values():
        for e in by_level.values():
            words += [f"{e.mean:+.{EFFECT_DIGITS}f}", *(f"{v:+.{EFFECT_DIGITS}f}" for v in e.per_unit.values())]
    assert_whole(text, words, f"redistribution view at {size}")
    assert width <= visible


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_audits_view_shows_each_evidence_word_whole(open_store, size):
    checks: list[Check] = stored_audits(open_store, COMPLETE)
    text, width, visible = await _view(open_store, size, "4", "#checks")
    words = [c.name for c in checks] + [w for c in checks for w in c.evidence.split()]
    assert_whole(text, words, f"audits view at {size}")
    assert width <= visible


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_runs_view_shows_each_loss_whole_or_names_it(open_store, size):
    """As a user met it: at 80x24 the job table ran past the view and its last loss read 3.2 for 3.204."""
    from hierconsole.present.numbers import loss
    from hierconsole.study.read import job_rows
    from hierconsole.vocabulary import ARMS
    from tests.stores.fixed import LIVE

    app = make_app(open_store, study=LIVE)
    async with app.run_test(size=size) as pilot:
        await pilot.press("2")
        await settle(pilot, app)
        text = screen_text(app)
        table = app.screen.query_one("#jobs")
        assert table.virtual_size.width <= table.size.width, "the job table fits its view"
    folded = " ".join(text.split())
    left_out = next((m for m in folded.split("(losses of ")[1:]), "").split(" left out")[0].split(", ")
    shown_arms = [arm for arm in ARMS if arm not in left_out]
    assert shown_arms, f"no loss column at {size}:\n{text}"
    jobs = [j for j in job_rows(open_store, LIVE) if j.losses]
    words = [loss(j.losses[arm]).plain for j in jobs for arm in shown_arms if arm in j.losses]
    assert_whole(text, words, f"runs view at {size}")
    header = next(line for line in text.splitlines() if " job " in line and "state" in line)
    assert header.split()[-len(shown_arms):] == shown_arms, header
    if size[0] >= 120:
        assert shown_arms == list(ARMS)
