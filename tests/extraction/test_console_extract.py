"""The console's import dialog extracts features from a CUB folder (a child `hierconsole extract`, its
progress followed), then imports them; a failed extraction or import is said in place."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hierconsole.study.db.catalog import load_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.read import list_datasets
from hierconsole.tui.screens.import_dialog import ImportDialog
from tests.extraction.conftest import CORRUPT, N_IMAGES, TINY
from tests.tui.conftest import make_app, settle, shown

pytestmark = pytest.mark.slow  # extraction in a child process


async def _extract_in_dialog(app, pilot, cub_images, tiny_model, name: str) -> None:
    await pilot.press("1")
    await settle(pilot, app)
    await pilot.press("i")
    await pilot.pause()
    dialog = app.screen
    assert isinstance(dialog, ImportDialog)
    dialog.query_one("#kind-cub").value = True
    await pilot.pause()
    dialog.query_one("#name").value = name
    for field, value in (
        ("root", cub_images.root),
        ("taxonomy", cub_images.taxonomy),
        ("weights", "none"),
        ("model", tiny_model),
    ):
        dialog.query_one(f"#path-{field}").value = str(value)
    await pilot.press("ctrl+s")
    await settle(pilot, app)


async def test_the_import_dialog_extracts_then_imports(tmp_path, cub_images, tiny_model):
    cub_images.repair(str(CORRUPT))
    progress: list[ImportDialog.Extracting] = []
    with Store(tmp_path / "home") as store:
        app = make_app(store)
        hook = lambda m: progress.append(m) if isinstance(m, ImportDialog.Extracting) else None  # noqa: E731
        async with app.run_test(size=(100, 40), message_hook=hook) as pilot:
            await _extract_in_dialog(app, pilot, cub_images, tiny_model, "cubx")
            assert not isinstance(app.screen, ImportDialog), shown(app)
        assert [d.dataset_id for d in list_datasets(store)] == ["cubx"]
        fs = load_dataset(store, "cubx")
        features, ids = fs.features, [str(i) for i in fs.ids]
    assert features.shape == (N_IMAGES, TINY["hidden_size"])
    assert progress and (progress[-1].done, progress[-1].total) == (N_IMAGES, N_IMAGES)
    # The same features as the command line gives.
    out = tmp_path / "cli.npz"
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "extract", "cub", str(cub_images.root), "-o", str(out),
         "--weights", "none", "--seed", "0", "--model", str(tiny_model)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with np.load(out, allow_pickle=False) as f:
        by_id = dict(zip((str(i) for i in f["ids"]), f["features"], strict=True))
    np.testing.assert_array_equal(features, np.stack([by_id[i] for i in ids]))


async def test_a_failed_import_after_extraction_is_said_in_place(tmp_path, cub_images, tiny_model):
    """The truncated image has no features: `import cub` refuses the set, and the dialog says so."""
    with Store(tmp_path / "home") as store:
        app = make_app(store)
        async with app.run_test(size=(100, 40)) as pilot:
            await _extract_in_dialog(app, pilot, cub_images, tiny_model, "cubx")
            assert isinstance(app.screen, ImportDialog)
            assert f"no features for image '{CORRUPT}'" in shown(app)
        assert list_datasets(store) == []
