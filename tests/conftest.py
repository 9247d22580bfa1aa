"""Fixtures shared by every test package: the tiny synthetic data and a store of fabricated studies."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from hierconsole.datasets import FeatureSet, make_synthetic
from hierconsole.study.db.storage import Store
from tests.stores.fixed import build_store
from tests.tiny import TINY


@pytest.fixture(scope="session")
def tiny_fs() -> FeatureSet:
    return make_synthetic(TINY)


@pytest.fixture(scope="session")
def fixed_home(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> Path:
    """A store with a complete study (one audit failing) and one still training; read-only for tests:
    copy it (`fixed_copy`) before changing anything."""
    home = tmp_path_factory.mktemp("fixed") / "home"
    build_store(home, tiny_fs)
    return home


@pytest.fixture
def open_store(fixed_home: Path) -> Iterator[Store]:
    """The fixed store, open (read it only)."""
    with Store(fixed_home) as store:
        yield store


@pytest.fixture
def fixed_copy(fixed_home: Path, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(fixed_home, home)
    return home
