"""The console: a keyboard-driven Textual app over the same domain functions as the CLI.

Only this package imports Textual. It opens the store itself, so a store held by another process is
reported before any screen is drawn.
"""

from __future__ import annotations

import sys

from hierconsole.errors import HierconsoleError

ORCHESTRATOR_STOP_SECONDS = 30.0


def run_app(home: str | None = None, gpus: list[str] | None = None) -> int:
    """Open the store under `home` and run the console until it quits; the exit status.

    `gpus` (e.g. ["0", "1"]) runs one worker per listed GPU, as `hierconsole run --gpus` does.
    """
    from hierconsole.study.db.storage import Store

    try:
        store = Store(home)  # a store held by another process is reported before any screen is drawn
    except HierconsoleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        store.verify_readable()  # a damaged block anywhere is named now, not as a half-drawn view
    except HierconsoleError as exc:
        store.close()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        from hierconsole.tui.app import HierConsole
    except ImportError as exc:
        # A broken installation is an error to report, never a reason to fall back to the help text.
        store.close()
        print(
            f"error: the console cannot start ({type(exc).__name__}: {exc}); reinstall hierconsole (it "
            "depends on textual), or use a subcommand (hierconsole --help)",
            file=sys.stderr,
        )
        return 1

    try:
        app = HierConsole(store, gpus=gpus)
        app.run()
        # The orchestrator thread may still be writing its last tick: let it end before the store closes.
        app.loop_done.wait(ORCHESTRATOR_STOP_SECONDS)
    finally:
        store.close()
    return app.return_code or 0
