"""A real home with the tiny dataset registered, for studies launched from the notebook API."""

from __future__ import annotations

from pathlib import Path

import pytest

from hierconsole.datasets import FeatureSet
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store


@pytest.fixture
def tiny_home(tmp_path: Path, tiny_fs: FeatureSet) -> Path:
    home = tmp_path / "home"
    with Store(home) as store:
        register_dataset(store, tiny_fs)
    return home
