"""Every screen at 80x24 on fixed data. Update after a deliberate change: pytest --snapshot-update."""

from __future__ import annotations

import pytest

from hierconsole.study.storage import Store
from hierconsole.tui.screens.dialogs import QuitDialog
from tests.tui.conftest import SIZE, make_app, settle
from tests.tui.fixtures import COMPLETE


def keys(*pressed: str):
    async def run_before(pilot) -> None:
        await settle(pilot, pilot.app)
        for key in pressed:
            await pilot.press(key)
            await settle(pilot, pilot.app)

    return run_before


CASES = {
    "runs": (None, ()),
    "run_detail": (None, ("enter",)),
    "datasets": (None, ("1",)),
    "effects": (COMPLETE, ("3",)),
    "audits_failed": (COMPLETE, ("4",)),
    "redistribution": (COMPLETE, ("5",)),
    "export": (COMPLETE, ("6",)),
    "help": (None, ("question_mark",)),
    "import_dialog": (None, ("1", "i")),
}


@pytest.mark.parametrize("case", CASES)
def test_screen(case, fixed_home, snap_compare):
    study, pressed = CASES[case]
    with Store(fixed_home) as store:
        assert snap_compare(make_app(store, study=study), terminal_size=SIZE, run_before=keys(*pressed))


def test_first_launch_offers_the_demo(tmp_path, snap_compare):
    with Store(tmp_path) as store:
        assert snap_compare(make_app(store), terminal_size=SIZE, run_before=keys())


def test_quit_question(fixed_home, snap_compare):
    async def run_before(pilot) -> None:
        await settle(pilot, pilot.app)
        pilot.app.push_screen(QuitDialog(2))
        await settle(pilot, pilot.app)

    with Store(fixed_home) as store:
        assert snap_compare(make_app(store), terminal_size=SIZE, run_before=run_before)
