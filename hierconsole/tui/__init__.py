"""The console: a keyboard-driven Textual app over the same domain functions as the CLI.

Only this package imports Textual. It opens the store itself, after painting its first frame, and says
in one line why when it cannot (held by another process, damaged).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hierconsole.study.db.storage import Store

ORCHESTRATOR_STOP_SECONDS = 30.0


def run_app(home: str | None = None, gpus: list[str] | None = None) -> int:
    """Run the console on the store under `home` until it quits; the exit status.

    The first frame (the view tabs and a loading line) is painted before the store is opened: a store
    held by another process, or damaged, is then said in one line after the console closes, exit 2.
    `gpus` (e.g. ["0", "1"]) runs one worker per listed GPU, as `hierconsole run --gpus` does.
    """
    from hierconsole.locations import resolve_home

    try:
        from hierconsole.tui.app import HierConsole
    except ImportError as exc:
        # A broken installation is an error to report, never a reason to fall back to the help text.
        print(
            f"error: the console cannot start ({type(exc).__name__}: {exc}); reinstall hierconsole (it "
            "depends on textual), or use a subcommand (hierconsole --help)",
            file=sys.stderr,
        )
        return 1

    def open_store() -> Store:
        from hierconsole.study.db.storage import Store

        store = Store(home)  # a store held by another process is refused here
        try:
            store.verify_readable()  # a damaged block anywhere is named now, not as a half-drawn view
        except BaseException:
            store.close()
            raise
        return store

    label = str(resolve_home(home, create=False))
    given: Store | None = None
    if "web_driver" in os.environ.get("TEXTUAL_DRIVER", ""):
        # Served in a browser (`hierconsole serve`): the store is opened before the console starts, so one
        # it cannot open ends the process at once and the page says why (under the web driver, a console
        # that exits while its first frame is in flight leaves its page waiting).
        from hierconsole.errors import HierconsoleError

        try:
            given = open_store()
        except HierconsoleError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
    app = HierConsole(given, open_store=None if given else open_store, gpus=gpus, home_label=label)
    try:
        app.run()
        # The orchestrator thread may still be writing its last tick: let it end before the store closes.
        app.loop_done.wait(ORCHESTRATOR_STOP_SECONDS)
    finally:
        app.store_settled.wait(ORCHESTRATOR_STOP_SECONDS)
        for store in (app.opened, given):
            if store is not None:
                store.close()
    if app.open_error is not None:
        print(f"error: {app.open_error}", file=sys.stderr)
        return app.open_error.exit_code
    return app.return_code or 0
