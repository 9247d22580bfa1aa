"""Fixtures for the console tests: an open fixed store and one app factory (the data: tests/conftest.py)."""

from __future__ import annotations

import io

from rich.console import Console

from hierconsole.datasets import FeatureSet, make_synthetic
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.tui.app import DemoOffer, HierConsole
from tests.tiny import TINY, tiny_preset

SIZE = (80, 24)


def tiny_demo(
    tiny_fs: FeatureSet, *, epochs: int = 2, seeds: tuple[int, ...] = (42, 2024), parallel: int = 2
) -> DemoOffer:
    """The one-keystroke demo, shrunk: the tiny dataset and a preset that trains in seconds."""
    # No validation passes: the console shows training and test results, and every pass costs seconds.
    preset = tiny_preset(
        epochs=epochs, seeds=seeds, **{"training.val_every": 0, "compute.max_parallel_jobs": parallel}
    )
    return DemoOffer(preset, lambda store: register_dataset(store, tiny_fs).dataset_id)


def fixed_demo() -> DemoOffer:
    """A demo offer whose text does not follow edits of the shipped preset (snapshots stay put)."""
    preset = tiny_preset(**{"study.description": "A tiny synthetic study for the console tests"})
    return DemoOffer(preset, lambda store: register_dataset(store, make_synthetic(TINY)).dataset_id)


def make_app(store: Store, **options) -> HierConsole:
    """The one app factory of the tests: no orchestrator unless asked, fixed labels."""
    options.setdefault("orchestrate", False)
    options.setdefault("demo", fixed_demo())
    options.setdefault("home_label", "~/hierconsole-test")
    options.setdefault("on_quit", "cancel")
    options.setdefault("cursor_blink", False)  # snapshots never depend on when they are taken
    options.setdefault("prebuild_views", False)  # each test builds only the views it shows
    return HierConsole(store, **options)


def screen_text(app: HierConsole) -> str:
    """What the terminal shows now, as plain text (the screenshot's text, without styles)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)


def shown(app: HierConsole) -> str:
    """The screen's words with line breaks and padding folded to single spaces (wrapping varies)."""
    return " ".join(screen_text(app).split())


async def settle(pilot, app: HierConsole) -> None:
    """Let loading workers finish and their messages land; the orchestrator worker is not waited for."""
    for _ in range(3):
        await pilot.pause()
        workers = [w for w in app.workers if w.group != "orchestrator" and not w.is_finished]
        if workers:
            await app.workers.wait_for_complete(workers)
    await pilot.pause()
