"""Bad values are refused before anything is created: no study, no queued job, no folder; and a `run`
launches only its own study's jobs (leftovers wait for `resume`)."""

from __future__ import annotations

import pytest
import torch

from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import create_study
from tests.reliability.conftest import TINY_RUN, cli, one_line_error, tree_digest
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # the CLI in subprocesses

# What this machine has decides which device values are bad here (a GPU CI host has CUDA).
HAS_CUDA = torch.cuda.is_available()
HAS_MPS = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
BAD = {
    "cuda": (["--device", "cuda"], "--device = 'cuda', but this machine's torch"),
    "mps": (["--device", "mps"], "has no MPS device"),
    "gpus": (["--gpus", "0"], "--gpus 0, but this machine's torch"),
    "gpu-id": (["--gpus", "99"], "there is no GPU 99"),
    "parallel": (["--parallel", "0"], "--parallel 0: give at least 1"),
    "threads": (["--set", "compute.threads_per_worker=0"], "threads_per_worker"),
    "queries": (["--set", "evaluation.n_query=5000"], "evaluation.n_query = 5000: the test split of dataset 'tiny' holds only 160 images; choose fewer queries: --set evaluation.n_query=32"),
}


@pytest.mark.parametrize("bad", BAD)
def test_a_bad_value_creates_nothing(tiny_home, bad):
    if (bad in ("cuda", "gpus") and HAS_CUDA) or (bad == "mps" and HAS_MPS) or (bad == "gpu-id" and not HAS_CUDA):
        pytest.skip(f"{bad!r} is not a bad value on this machine")
    flags, message = BAD[bad]
    before = tree_digest(tiny_home)
    text = one_line_error(cli(tiny_home, *TINY_RUN, "--epochs", "1", "--seeds", "42", *flags))
    assert message in text
    assert tree_digest(tiny_home) == before
    assert not (tiny_home / "studies").exists()


def test_run_launches_only_its_own_study(tiny_home):
    with Store(tiny_home) as store:
        leftover = create_study(store, tiny_preset(epochs=1, seeds=(7,)), "tiny")  # e.g. a console's queue
    done = cli(tiny_home, *TINY_RUN, "--epochs", "1", "--seeds", "42")
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(tiny_home, read_only=True) as store:
        states = store.rows("SELECT DISTINCT state FROM jobs WHERE study_id = ?", [leftover])
    assert states == [("queued",)]
    runs = cli(tiny_home, "runs", leftover)
    assert "queued" in runs.stdout


@pytest.mark.skipif(HAS_CUDA, reason="CUDA is present: --device cuda is not a bad value here")
def test_a_family_with_a_bad_device_creates_nothing(tiny_home):
    before = tree_digest(tiny_home)
    text = one_line_error(cli(tiny_home, "run", "nabirds-curvature-control", "--device", "cuda"))
    assert "--device = 'cuda', but this machine's torch" in text
    assert tree_digest(tiny_home) == before and not (tiny_home / "studies").exists()


@pytest.mark.parametrize("ids", ["abc", "-1", "0,x"])
def test_resume_refuses_a_gpu_id_that_is_no_index_naming_it(tiny_home, ids):
    before = tree_digest(tiny_home)
    done = cli(tiny_home, "resume", "--gpus", ids)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    bad = {"abc": "abc", "-1": "-1", "0,x": "x"}[ids]
    (error,) = [line for line in done.stderr.splitlines() if "error:" in line]
    assert f"GPU id {bad!r} is not a GPU index" in error and "e.g. 0,1" in error, error
    assert tree_digest(tiny_home) == before


@pytest.mark.skipif(HAS_CUDA, reason="CUDA is present: --gpus 0 is not a bad value here")
def test_resume_without_cuda_says_to_drop_gpus_not_an_option_it_lacks(tiny_home):
    before = tree_digest(tiny_home)
    text = one_line_error(cli(tiny_home, "resume", "--gpus", "0"))
    assert "--gpus 0, but this machine's torch" in text and "(drop --gpus)" in text
    assert "--device" not in text  # `resume` has no --device
    assert tree_digest(tiny_home) == before
