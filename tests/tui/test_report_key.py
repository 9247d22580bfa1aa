"""One key in the Effects view writes the study's report into the home and says where."""

from __future__ import annotations

from hierconsole.locations import report_path
from hierconsole.study.db.storage import Store
from tests.stores.fixed import COMPLETE
from tests.tui.conftest import SIZE, make_app, settle


async def test_o_writes_the_report_and_says_where(fixed_copy):
    with Store(fixed_copy) as store:
        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            await pilot.press("o")
            await app.workers.wait_for_complete()
            await settle(pilot, app)
            messages = [n.message for n in app._notifications]
    path = report_path(fixed_copy, COMPLETE)
    assert f"wrote the report to {path}" in messages, messages
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and COMPLETE in page and "data:image/png;base64," in page
