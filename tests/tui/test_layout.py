"""The console from 60x20 to 200x60: every tab reachable and numbered, a footer whose keys never collide
with the palette hint, tables that scroll sideways instead of cutting numbers."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.read import per_seed
from hierconsole.tui.actions import REPLICATION_VIEW, VIEW_MODES, actions_for
from tests.stores.fixed import COMPLETE
from tests.tui.conftest import make_app, screen_text, settle

SIZES = [(60, 20), (80, 24), (200, 60)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_tabs_and_footer_fit(open_store, size):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=size) as pilot:
        keys = [str(i) for i in range(1, len(VIEW_MODES) + 1)] + [REPLICATION_VIEW[0]]
        for key, mode in zip(keys, [m for m, _ in VIEW_MODES] + [REPLICATION_VIEW[1]], strict=True):
            await pilot.press(key)
            await settle(pilot, app)
            lines = screen_text(app).splitlines()
            tabs, footer = lines[0], lines[-1]
            for j in keys:
                assert f" {j} " in tabs, (mode, tabs)
            for a in (*actions_for(mode), *actions_for("app")):
                if a.show and a.key != "enter":  # enter belongs to the focused table there
                    assert f"{a.key_display or a.key} {a.description}" in footer, (mode, footer)
            # The palette hint is shown only where it has room of its own.
            assert "^p palette" not in footer or footer.rstrip().endswith("^p palette"), footer
            assert "quit▏" not in footer and "q quit" in footer


@pytest.mark.parametrize("size", [(60, 20), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_effects_table_scrolls_instead_of_squeezing_numbers(open_store, size):
    effects = simple_effects(per_seed(open_store, COMPLETE), ["hier_mAP"])["hier_mAP"]
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=size) as pilot:
        await pilot.press("3")
        await settle(pilot, app)
        content = app.screen.query_one("#content")
        assert "…" not in screen_text(app)
        # The tables are laid out for the view's width (narrower forms, or a record per row): drawn at
        # the widget's width, every number shows whole.
        console = Console(width=content.size.width, file=io.StringIO(), record=True)
        console.print(content.content)
        drawn = " ".join(console.export_text().split())
        assert "…" not in drawn
        for e in effects.values():
            assert f"{e.mean:+.6f} ± {e.sd:.6f}" in drawn
