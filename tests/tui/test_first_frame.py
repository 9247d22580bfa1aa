"""The console's first frame comes before its store: the view tabs, a loading line and the keys, painted
while the store opens (a new home makes its store then), and the first view once it is open."""

from __future__ import annotations

import threading

from hierconsole.study.db.storage import Store
from tests.tui.conftest import SIZE, make_app, settle, shown


async def test_the_first_frame_on_an_empty_home_is_painted_before_the_store_opens(tmp_path):
    home = tmp_path / "home"
    gate = threading.Event()
    stores: list[Store] = []

    def open_store() -> Store:
        gate.wait(30)  # held until the first frame has been looked at
        stores.append(Store(home))
        return stores[-1]

    app = make_app(None, open_store=open_store)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            first = shown(app)
            assert not app.ready and not (home / "hierconsole.duckdb").exists()
            assert "1 Datasets" in first and "2 Runs" in first  # the chrome
            assert "opening the store in ~/hierconsole-test…" in first  # the loading line
            await pilot.press("2")  # a view key before the store is open does nothing (and breaks nothing)
            gate.set()
            for _ in range(300):
                if app.ready:
                    break
                await pilot.pause(0.05)
            await settle(pilot, app)
            assert app.ready and app.current_mode == "datasets"  # an empty home starts on Datasets
            assert "opening the store" not in shown(app)
    finally:
        gate.set()
        for store in stores:
            store.close()


async def test_a_store_that_cannot_be_opened_closes_the_console_with_its_error(tmp_path):
    (tmp_path / "plain").write_text("a file, not a folder")
    app = make_app(None, open_store=lambda: Store(tmp_path / "plain" / "home"))
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(300):
            if app.open_error is not None:
                break
            await pilot.pause(0.05)
    assert app.open_error is not None and "cannot create the home folder" in str(app.open_error)
    assert app.return_code == 2 and app.opened is None and not app.ready
