"""What a dialog's focus and a notice look like: the field being edited stands out, and a notice takes
its own line above the footer instead of covering the view."""

from __future__ import annotations

from textual.widgets import Label

from tests.stores.fixed import COMPLETE
from tests.tui.conftest import SIZE, make_app, screen_text, settle, shown


async def test_the_focused_dialog_field_stands_out(open_store):
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1", "i")
        await settle(pilot, app)
        dialog = app.screen
        name_label = dialog.query_one("#name").parent.query_one(Label)
        other_label = dialog.query_one("#row-features").query_one(Label)
        focused, unfocused = name_label.rich_style, other_label.rich_style
        assert app.focused is dialog.query_one("#name")
        assert focused.reverse and not unfocused.reverse
        await pilot.press("tab")  # on to the next field: the mark moves with the focus
        await settle(pilot, app)
        assert not name_label.rich_style.reverse


async def test_a_notice_never_covers_the_view(open_store):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await settle(pilot, app)
        before = screen_text(app).splitlines()
        await pilot.press("a")  # one aggregation only: a notice says how to get another
        await settle(pilot, app)
        after = screen_text(app).splitlines()
        notice = next(i for i, line in enumerate(after) if line.startswith(" aggregation: only"))
        assert notice >= len(after) - 4  # its own lines, just above the footer, titled
        # Every table row shown before is still shown whole (the view gave up rows at its bottom only).
        rows = [line for line in before[:notice] if "±" in line]
        assert rows and all(line in after for line in rows)
        assert "geom_R" in shown(app)
