"""Every view at 60x20, 80x24 and 160x48 on fixed data, with the finished and the running study where
the view shows one study. Update after a deliberate change: pytest --snapshot-update.

Text fields do not blink here (`make_app`), so a screenshot never depends on when it was taken.
"""

from __future__ import annotations

import pytest
from textual.widgets import Input

from hierconsole.study.db.storage import Store
from hierconsole.tui.screens.dialogs import QuitDialog
from tests.stores.fixed import COMPLETE, LIVE
from tests.tui.conftest import make_app, settle

pytestmark = pytest.mark.snapshot

SIZES = {"60x20": (60, 20), "80x24": (80, 24), "160x48": (160, 48)}
STUDIES = {"finished": COMPLETE, "running": LIVE}
PER_STUDY = {
    "runs": (),
    "run_detail": ("down", "enter"),  # the finished study's second seed; the live study's running one
    "effects": ("3",),
    "audits": ("4",),
    "redistribution": ("5",),
}
"""Views that show the current study: one snapshot per study."""
ONCE = {
    "datasets": ("1",),
    "export": ("6",),
    "help": ("question_mark",),
    "import_dialog": ("1", "i"),
}
"""Views that do not depend on which study is current."""


def keys(*pressed: str):
    async def run_before(pilot) -> None:
        await settle(pilot, pilot.app)
        for key in pressed:
            await pilot.press(key)
            await settle(pilot, pilot.app)

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("study", STUDIES)
@pytest.mark.parametrize("view", PER_STUDY)
def test_view_of_a_study(view, study, size, fixed_home, snap_compare):
    with Store(fixed_home) as store:
        app = make_app(store, study=STUDIES[study])
        assert snap_compare(app, terminal_size=SIZES[size], run_before=keys(*PER_STUDY[view]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("view", ONCE)
def test_view(view, size, fixed_home, snap_compare):
    with Store(fixed_home) as store:
        assert snap_compare(make_app(store), terminal_size=SIZES[size], run_before=keys(*ONCE[view]))


def test_first_launch_offers_the_demo(tmp_path, snap_compare):
    with Store(tmp_path) as store:
        assert snap_compare(make_app(store), terminal_size=SIZES["80x24"], run_before=keys())


def test_quit_question(fixed_home, snap_compare):
    async def run_before(pilot) -> None:
        await settle(pilot, pilot.app)
        pilot.app.push_screen(QuitDialog(2))
        await settle(pilot, pilot.app)

    with Store(fixed_home) as store:
        assert snap_compare(make_app(store), terminal_size=SIZES["60x20"], run_before=run_before)


async def test_text_fields_do_not_blink_in_tests(open_store):
    """The import dialog's snapshot failed on the cursor's blink state: its fields keep still here."""
    app = make_app(open_store)
    async with app.run_test(size=SIZES["80x24"]) as pilot:
        await keys("1", "i")(pilot)
        fields = list(app.screen.query(Input))
        assert fields and not any(f.cursor_blink for f in fields)
        assert app.screen.focused in fields
