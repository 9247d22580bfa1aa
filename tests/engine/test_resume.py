"""A worker killed with SIGKILL resumes from its last checkpoint to a bit-identical end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hierconsole.engine import checkpoints
from hierconsole.engine.checkpoints import load_payload
from hierconsole.engine.trainer import FAULT_ENV
from hierconsole.engine.worker import EXIT_DONE

from .conftest import make_spec

pytestmark = pytest.mark.slow  # worker processes killed and resumed


def _worker(spec_path: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run(
        [sys.executable, "-m", "hierconsole.engine.worker", "--home", str(spec_path.parent), str(spec_path)],
        env=env,
        capture_output=True,
        timeout=300,
    )


def _finals(folder: Path) -> dict[str, dict[str, torch.Tensor]]:
    return {p.name: load_payload(p)["model"] for p in sorted(folder.glob("final-*.pt"))}


# Both engines: the batched one (all cells as one computation) and the per-cell reference.
@pytest.fixture(scope="module", params=[True, False], ids=["batched", "per-cell"])
def uninterrupted(request, tmp_path_factory, tiny_fs, tiny_dir):
    spec = make_spec(tmp_path_factory.mktemp("ref") / "ref", tiny_fs, tiny_dir, batched=request.param)
    done = _worker(Path(spec.out_dir) / "spec.json")
    assert done.returncode == EXIT_DONE, done.stdout.decode() + done.stderr.decode()
    return request.param, _finals(Path(spec.out_dir))


# Epoch 1 dies before any checkpoint (restart from scratch); epoch 3 dies after two, which only works if
# the batch generator, the per-cell dropout streams and the optimiser moments all come back exactly.
@pytest.mark.parametrize("fault", ["1:3", "3:2"])
def test_sigkill_then_resume_is_bit_identical(tmp_path, tiny_fs, tiny_dir, uninterrupted, fault):
    batched, uninterrupted = uninterrupted
    spec = make_spec(tmp_path / "job", tiny_fs, tiny_dir, batched=batched)
    spec_path = Path(spec.out_dir) / "spec.json"
    killed = _worker(spec_path, fault)
    assert killed.returncode == -signal.SIGKILL
    found = checkpoints.list_checkpoints(Path(spec.out_dir) / "checkpoints")
    saved = [e for e, _ in found]
    assert saved == ([] if fault.startswith("1:") else [1, 2])
    for _, path in found:  # tensors, numbers and strings only, whichever engine wrote them
        assert torch.load(path, weights_only=True)["batched"] is batched
    resumed = _worker(spec_path)
    assert resumed.returncode == EXIT_DONE, resumed.stderr.decode()
    got = _finals(Path(spec.out_dir))
    assert got.keys() == uninterrupted.keys() and len(got) == 4
    for name, state in got.items():
        for k, v in state.items():
            assert torch.equal(v, uninterrupted[name][k]), f"{name}:{k}"
    events = (Path(spec.out_dir) / "events.jsonl").read_text()
    if saved:
        assert '"kind":"resume"' in events


def test_truncated_latest_checkpoint_falls_back_to_the_previous(tmp_path):
    d = tmp_path / "ck"
    for epoch in (1, 2):
        checkpoints.save_checkpoint(d, epoch, {"epoch": epoch, "w": torch.full((64,), float(epoch))})
    latest = checkpoints.checkpoint_path(d, 2)
    latest.write_bytes(latest.read_bytes()[:40])  # a torn write after a power loss
    found, notes = checkpoints.load_latest(d)
    assert found is not None
    epoch, payload = found
    assert epoch == 1 and torch.equal(payload["w"], torch.full((64,), 1.0))
    assert notes and "ckpt-000002.pt" in notes[0] and "SHA256" in notes[0]


def test_checkpoints_keep_only_the_newest(tmp_path):
    d = tmp_path / "ck"
    for epoch in range(1, 5):
        checkpoints.save_checkpoint(d, epoch, {"epoch": epoch}, keep=2)
    assert [e for e, _ in checkpoints.list_checkpoints(d)] == [3, 4]
    assert not list(d.glob(".*tmp*"))


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "per-cell"])
def test_soft_label_cells_resume_with_their_prototypes_bit_identical(tmp_path, tiny_fs, tiny_dir, batched):
    # An objective's own parameters (soft-label CE's leaf prototypes and their AdamW moments) come back from
    # the checkpoint as exactly as the projector's do.
    arms = ("E_C", "L_C", "H_R")
    runs = {}
    for name, fault in (("whole", None), ("killed", "3:2")):
        spec = make_spec(tmp_path / name, tiny_fs, tiny_dir, arms=arms, batched=batched)
        spec_path = Path(spec.out_dir) / "spec.json"
        if fault:
            assert _worker(spec_path, fault).returncode == -signal.SIGKILL
        done = _worker(spec_path)
        assert done.returncode == EXIT_DONE, done.stderr.decode()
        last = checkpoints.list_checkpoints(Path(spec.out_dir) / "checkpoints")[-1][1]
        runs[name] = (_finals(Path(spec.out_dir)), load_payload(last)["cells"])
    (whole, whole_ckpt), (resumed, resumed_ckpt) = runs["whole"], runs["killed"]
    assert whole.keys() == resumed.keys() and len(whole) == 3
    for name, state in resumed.items():
        for k, v in state.items():
            assert torch.equal(v, whole[name][k]), f"{name}:{k}"
    for arm in ("E_C", "L_C"):
        mine, theirs = resumed_ckpt[arm]["prototypes"], whole_ckpt[arm]["prototypes"]
        assert torch.equal(mine["value"], theirs["value"])
        assert all(torch.equal(mine["optimizer"][k], theirs["optimizer"][k]) for k in theirs["optimizer"])
    assert "prototypes" not in whole_ckpt["H_R"]
