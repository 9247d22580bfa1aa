"""Fixtures for the console tests: the tiny synthetic data, a fixed store, and one app factory."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from hierconsole.catalog import register_dataset
from hierconsole.datasets import FeatureSet, make_synthetic
from hierconsole.storage import Store
from hierconsole.tui.app import DemoOffer, HierConsole
from tests.engine.conftest import TINY, tiny_preset
from tests.tui.fixtures import build_store

SIZE = (80, 24)


@pytest.fixture(scope="session")
def tiny_fs() -> FeatureSet:
    return make_synthetic(TINY)


@pytest.fixture(scope="session")
def fixed_home(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> Path:
    """Read-only for tests: copy it (`fixed_copy`) before changing anything."""
    home = tmp_path_factory.mktemp("fixed") / "home"
    build_store(home, tiny_fs)
    return home


@pytest.fixture
def fixed_copy(fixed_home: Path, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    return home


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
    return HierConsole(store, **options)


@pytest.fixture
def open_store(fixed_home: Path) -> Iterator[Store]:
    with Store(fixed_home) as store:
        yield store


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
