"""`--executor` and `--ray-address` refused as a user meets them: one line naming the option and the fix,
exit status 2, nothing created. Ray's absence is simulated by a `ray` package on PYTHONPATH that cannot
be imported (as where the extra is not installed); none of these start Ray."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.conftest import TINY_RUN, cli, one_line_error, tree_digest

pytestmark = pytest.mark.slow  # the CLI in subprocesses

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def without_ray(tmp_path: Path) -> dict[str, str]:
    """An environment in which `import ray` fails as it does where Ray is not installed."""
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')  # the test's stand-in for absence\n"
    )
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim.parent), str(ROOT)])}


def test_ray_executor_without_ray_says_how_to_install_it(tiny_home, without_ray):
    before = tree_digest(tiny_home)
    done = cli(tiny_home, *TINY_RUN, "--executor", "ray", env=without_ray)
    error = one_line_error(done)
    assert "--executor ray needs Ray" in error and "pip install 'hierconsole[ray]'" in error
    assert tree_digest(tiny_home) == before  # no study, no job folder


def test_the_environment_default_is_checked_too(tiny_home, without_ray):
    before = tree_digest(tiny_home)
    error = one_line_error(cli(tiny_home, *TINY_RUN, env={**without_ray, "HIERCONSOLE_EXECUTOR": "ray"}))
    assert "pip install 'hierconsole[ray]'" in error
    error = one_line_error(cli(tiny_home, *TINY_RUN, env={**os.environ, "HIERCONSOLE_EXECUTOR": "slurm"}))
    assert "HIERCONSOLE_EXECUTOR 'slurm'" in error and "local, ray" in error
    assert tree_digest(tiny_home) == before


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--ray-address", "auto"], "--ray-address names the Ray cluster of --executor ray"),
        (["--executor", "ray", "--gpus", "0"], "--gpus 0 picks GPUs of this machine"),
        (["--executor", "ray", "--ray-address", "nowhere"], "--ray-address 'nowhere': give `auto`"),
    ],
    ids=["address-without-ray", "gpus-with-ray", "bad-address"],
)
def test_executor_options_that_do_not_fit_are_refused(tiny_home, args, expected):
    before = tree_digest(tiny_home)
    error = one_line_error(cli(tiny_home, *TINY_RUN, *args))
    assert expected in error
    assert tree_digest(tiny_home) == before


def test_resume_checks_the_executor_before_touching_a_job(tiny_home, without_ray):
    error = one_line_error(cli(tiny_home, "resume", "--executor", "ray", env=without_ray))
    assert "pip install 'hierconsole[ray]'" in error
