"""Fixtures shared by every test package: the tiny synthetic data, a store of fabricated studies and a few
really trained homes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hierconsole.datasets import FeatureSet, make_synthetic
from hierconsole.study.db.storage import Store
from tests.homes import BASELINES, PLAIN, TrainedFamily, TrainedStudy, train_family, train_study
from tests.replicated import Replicated, make_data, replicate_cub
from tests.stores.fixed import build_store
from tests.tiny import TINY


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker per core, and one more where `slow` tests may run. About a third of a serial run
    waits on their subprocesses (workers starting, a CLI's interpreter, a kill's grace period), time another
    worker fills; the quick loop (`-m "not slow ..."`) waits on none."""
    cores = os.cpu_count() or 1
    return cores if "not slow" in (config.getoption("markexpr") or "") else cores + 1


LONGEST_GROUPS = ("replicated", "ray")
"""xdist groups that take minutes on one worker: started first, so that they are not the run's tail."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n`, `--dist loadgroup`: pyproject.toml), a module's tests run on one worker, so
    its module fixtures (a trained study, a replicated home) are built once; a module may name a wider group
    (`xdist_group("ray")`: Ray's local instances find each other's clusters, so its tests run one at a time).
    Groups are handed out in the order of the items (`--no-loadscope-reorder`): the longest groups first,
    then the modules with a `slow` test, then the rest, each module's tests kept together."""
    rank: dict[Path, int] = {}
    for item in items:
        if (group := item.get_closest_marker("xdist_group")) is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))  # the module's path
        elif group.args and group.args[0] in LONGEST_GROUPS:
            rank[item.path] = 0
        if item.get_closest_marker("slow") is not None:
            rank[item.path] = min(rank.get(item.path, 1), 1)
    items.sort(key=lambda item: rank.get(item.path, 2))


def _is_python(program: object) -> bool:
    name = os.path.basename(os.fsdecode(program)) if isinstance(program, str | bytes | os.PathLike) else ""
    return program == sys.executable or name.startswith("python")


@pytest.fixture(autouse=True)
def _python_subprocesses_are_slow(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that starts a Python process (the CLI, a worker, a Ray node) must be marked `slow`: the quick
    loop (`-m "not slow"`) is the one without them. Starting one unmarked fails the test, naming it."""
    if request.node.get_closest_marker("slow") is not None:
        return
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def checked(self: subprocess.Popen, args: object, executable: object, *rest: object, **kw: object) -> None:
        program = executable or (args if isinstance(args, str | bytes | os.PathLike) else args[0])  # type: ignore[index]
        if _is_python(program):
            raise AssertionError(
                f"{request.node.nodeid} starts a Python process ({args!r}): mark it pytest.mark.slow"
            )
        execute_child(self, args, executable, *rest, **kw)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", checked)


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


# Really trained homes, built once per session (tests/homes.py): copy them with `copy_home`, never write.
@pytest.fixture(scope="session")
def trained_plain(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> TrainedStudy:
    return train_study(tmp_path_factory.mktemp("trained-plain") / "home", tiny_fs, PLAIN)


@pytest.fixture(scope="session")
def trained_baselines(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> TrainedStudy:
    return train_study(tmp_path_factory.mktemp("trained-baselines") / "home", tiny_fs, BASELINES)


@pytest.fixture(scope="session")
def trained_family(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> TrainedFamily:
    return train_family(tmp_path_factory.mktemp("trained-family"), tiny_fs)


# A smoke replication, run once per session (tests/replicated.py): copy its home before changing it.
@pytest.fixture(scope="session")
def replicate_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_data(tmp_path_factory.mktemp("replicate-data"))


@pytest.fixture(scope="session")
def replicated_cub(tmp_path_factory: pytest.TempPathFactory, replicate_data: Path) -> Replicated:
    return replicate_cub(tmp_path_factory.mktemp("replicated-cub"), replicate_data)
