"""The HIER-style arm under the authors' recipe (engine.hier_recipe): the class-balanced sampler against a
loop written here, the head's shape and init, the optimiser's settings, then the arm inside a real job:
its own batches and update count, the cells untouched by it, and bit-identical after a SIGKILL and a
resume."""

from __future__ import annotations

import math
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from hierconsole.config.preset import HierConfig
from hierconsole.contract.exit_status import EXIT_DONE
from hierconsole.contract.jobspec import CellSpec
from hierconsole.engine import checkpoints
from hierconsole.engine.checkpoints import load_payload
from hierconsole.engine.determinism import derive_seed
from hierconsole.engine.hier_recipe import AuthorsHead, authors_head, authors_optimizer, balanced_batches
from hierconsole.engine.hier_style import HierObjective, hier_ball
from hierconsole.engine.projector import count_trainable
from hierconsole.engine.trainer import FactorialTrainer
from hierconsole.study.analysis.audits.baselines import authors_head_trainable
from hierconsole.vocabulary import HIER_AUTHORS, HIER_STYLE, HIER_STYLE_LOSS, POINCARE

from .conftest import cells_for, make_spec, spec_preset
from .test_hier_style import _finals, _same, _worker

HIER_CELL = CellSpec(HIER_STYLE, POINCARE, HIER_STYLE_LOSS)
# The tiny data's 12 leaves, 2 images each per batch; cheap HIER-term settings (the defaults are tested below).
AUTHORS = {
    "baselines.hier.recipe": HIER_AUTHORS,
    "baselines.hier.batch_size": 24,
    "baselines.hier.per_class": 2,
    "baselines.hier.embedding": 16,
    "baselines.hier.proxies": 12,
    "baselines.hier.triplets_per_anchor": 3,
    "baselines.hier.topk": 4,
}


# -- the sampler --------------------------------------------------------------------------------------


def loop_batches(leaf, batch_size, per_class, seed, epoch):
    """The sampler as a loop: each batch k distinct classes, then per_class rows of each (with replacement),
    rows taken in ascending index order within the class, from the same PCG64 stream."""
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, "hier", "balanced-sampler", epoch)))
    classes = sorted(set(int(v) for v in leaf))
    k = batch_size // per_class
    batches = []
    for _ in range(len(leaf) // batch_size):
        chosen = rng.choice(len(classes), size=k, replace=k > len(classes))
        u = rng.random((k, per_class))
        batch = []
        for i, ci in enumerate(chosen):
            members = [r for r in range(len(leaf)) if leaf[r] == classes[ci]]
            batch += [members[int(u[i, j] * len(members))] for j in range(per_class)]
        batches.append(batch)
    return np.array(batches, dtype=np.int64)


def _uneven_leaves() -> np.ndarray:
    rng = np.random.default_rng(7)
    # 15 classes of 1 to 20 rows, shuffled: one class has fewer rows than per_class.
    sizes = [1, *rng.integers(2, 21, size=14).tolist()]
    return rng.permutation(np.repeat(np.arange(15) * 3 + 5, sizes))


def test_balanced_batches_hold_per_class_images_of_distinct_classes_and_match_a_loop():
    leaf = _uneven_leaves()
    got = balanced_batches(leaf, 12, 3, seed=42, epoch=1)
    assert got.shape == (len(leaf) // 12, 12) and got.dtype == np.int64
    np.testing.assert_array_equal(got, loop_batches(leaf, 12, 3, 42, 1))
    for batch in got:
        labels, counts = np.unique(leaf[batch], return_counts=True)
        assert len(labels) == 4 and set(counts.tolist()) == {3}
    # More classes asked per batch than exist: classes repeat (the authors' replace = True), still m each.
    many = balanced_batches(leaf, 40, 2, seed=42, epoch=1)
    np.testing.assert_array_equal(many, loop_batches(leaf, 40, 2, 42, 1))
    assert all(len(np.unique(leaf[b])) <= 15 for b in many)


def test_balanced_batches_are_a_function_of_seed_and_epoch():
    leaf = _uneven_leaves()
    a = balanced_batches(leaf, 12, 3, seed=42, epoch=3)
    np.testing.assert_array_equal(a, balanced_batches(leaf.copy(), 12, 3, seed=42, epoch=3))
    assert not np.array_equal(a, balanced_batches(leaf, 12, 3, seed=42, epoch=4))
    assert not np.array_equal(a, balanced_batches(leaf, 12, 3, seed=2024, epoch=3))
    # Over many epochs every row is drawn: the rows of a class are sampled uniformly, not a fixed subset.
    seen = np.unique(np.concatenate([balanced_batches(leaf, 12, 3, 42, e).ravel() for e in range(1, 200)]))
    np.testing.assert_array_equal(seen, np.arange(len(leaf)))


def test_balanced_batches_refuse_what_cannot_fill_a_batch():
    with pytest.raises(ValueError, match="not a multiple"):
        balanced_batches(np.arange(10), 5, 2, 0, 1)
    with pytest.raises(ValueError, match="cannot fill"):
        balanced_batches(np.arange(10), 12, 2, 0, 1)


# -- the head and the optimiser -----------------------------------------------------------------------


def test_authors_head_is_layernorm_then_an_orthogonal_linear_map_into_their_ball():
    hier = HierConfig()
    head = authors_head(768, hier_ball(hier), hier, seed=42)
    assert isinstance(head, AuthorsHead)
    assert count_trainable(head) == authors_head_trainable(768, 128) == 768 * 128 + 128
    assert [n for n, _ in head.named_parameters()] == ["fc.weight", "fc.bias"]  # LayerNorm without affine
    w = head.fc.weight.detach().double()
    torch.testing.assert_close(w @ w.T, torch.eye(128, dtype=torch.float64), atol=1e-5, rtol=0)
    assert torch.count_nonzero(head.fc.bias) == 0
    x = torch.randn(5, 768, generator=torch.Generator().manual_seed(0)) * 3 + 1
    z = head(x)
    assert z.shape == (5, 128) and float(z.detach().norm(dim=1).max()) <= head.geometry.bound + 1e-6
    # raw is Linear(LayerNorm(x)), LayerNorm written out here.
    norm = (x - x.mean(1, keepdim=True)) / torch.sqrt(x.var(1, unbiased=False, keepdim=True) + 1e-5)
    torch.testing.assert_close(head.raw(x), norm @ head.fc.weight.T + head.fc.bias, atol=1e-5, rtol=1e-5)
    again, other = authors_head(768, hier_ball(hier), hier, 42), authors_head(768, hier_ball(hier), hier, 2024)
    assert torch.equal(again.fc.weight, head.fc.weight) and not torch.equal(other.fc.weight, head.fc.weight)


def test_authors_recipe_defaults_and_optimiser_are_theirs():
    hier = HierConfig()
    assert hier.recipe == HIER_AUTHORS
    assert (hier.batch_size, hier.per_class, hier.embedding) == (180, 2, 128)
    assert (hier.lr, hier.weight_decay, hier.adam_eps, hier.grad_value_clip) == (5e-6, 1e-2, 1e-4, 10.0)
    head = authors_head(48, hier_ball(hier), hier, 0)
    objective = HierObjective(hier, 12, hier.embedding, 0, hier_ball(hier))
    opt = authors_optimizer(head, objective, hier)
    assert isinstance(opt, torch.optim.AdamW)
    # Their groups: the last layer at lr, the hyperbolic proxies at 50 x lr, the class proxies at 1e4 x lr.
    lrs = [g["lr"] for g in opt.param_groups]
    assert lrs == [5e-6, 2.5e-4, 5e-2]
    assert lrs[1] == pytest.approx(50 * hier.lr) and lrs[2] == pytest.approx(1e4 * hier.lr)
    assert all(g["weight_decay"] == 1e-2 and g["eps"] == 1e-4 and g["betas"] == (0.9, 0.999) for g in opt.param_groups)
    assert [g["params"] for g in opt.param_groups][1][0] is objective.hyperbolic_proxies


# -- the arm in a job ---------------------------------------------------------------------------------


def _spec(folder: Path, fs, fs_dir: Path, *, hier: bool = True, **values):
    spec = make_spec(folder, fs, fs_dir, preset=spec_preset(**{**AUTHORS, **values}))
    spec = replace(spec, cells=(*cells_for(("E_R", "H_S")), *((HIER_CELL,) if hier else ())))
    spec.write(Path(spec.out_dir) / "spec.json")
    return spec


def _train(spec) -> tuple[dict, list]:
    got: list = []
    FactorialTrainer(spec, got.append).run()
    return _finals(Path(spec.out_dir)), got


def test_authors_arm_trains_on_its_own_batches_and_leaves_the_cells_untouched(tmp_path, tiny_fs, tiny_dir):
    spec = _spec(tmp_path / "a", tiny_fs, tiny_dir)
    first, events = _train(spec)
    second, _ = _train(_spec(tmp_path / "b", tiny_fs, tiny_dir))
    _same(first, second)
    without, _ = _train(_spec(tmp_path / "c", tiny_fs, tiny_dir, hier=False))
    # The cells' trajectories do not depend on the authors' arm training in their job.
    _same({k: v for k, v in first.items() if "hier" not in k}, without)
    assert set(first["final-hier.pt"]) == {"fc.weight", "fc.bias"}
    inits = {e.cell: e for e in events if type(e).__name__ == "Init"}
    assert inits["hier"].trainable_params == 48 * 16 + 16 != inits["E_R"].trainable_params
    assert inits["hier"].init_sha256 != inits["E_R"].init_sha256
    n = len(np.load(spec.train_split)["fit"])
    epochs = [e for e in events if type(e).__name__ == "Epoch"]
    for epoch in (1, 2, 3):
        rows = {e.cell: e for e in epochs if e.epoch == epoch}
        assert rows["E_R"].batch_sha256 == rows["H_S"].batch_sha256 != rows["hier"].batch_sha256
        assert rows["hier"].updates == epoch * (n // 24) and rows["E_R"].updates == epoch * (n // 32)
    losses = [e.train_loss for e in epochs if e.cell == "hier"]
    assert all(math.isfinite(v) for v in losses)
    assert {e.cell: e for e in events if type(e).__name__ == "Final"}["hier"].reload_max_diff == 0.0
    # Its learning rates stay the authors' constant ones whatever the study's schedule sets for the cells.
    ckpt = checkpoints.load_latest(Path(spec.out_dir) / "checkpoints")[0]
    assert ckpt is not None
    groups = ckpt[1]["cells"]["hier"]["optimizer"]["param_groups"]
    assert [g["lr"] for g in groups] == [5e-6, 2.5e-4, 5e-2]


@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical_with_the_authors_arm(tmp_path, tiny_fs, tiny_dir):
    # The uninterrupted reference in this process (the same spec, threads and engine as the worker's).
    want, _ = _train(_spec(tmp_path / "ref", tiny_fs, tiny_dir))
    spec = _spec(tmp_path / "job", tiny_fs, tiny_dir)
    spec_path = Path(spec.out_dir) / "spec.json"
    killed = _worker(spec_path, "3:2")
    assert killed.returncode == -signal.SIGKILL
    assert [e for e, _ in checkpoints.list_checkpoints(Path(spec.out_dir) / "checkpoints")] == [1, 2]
    resumed = _worker(spec_path)
    assert resumed.returncode == EXIT_DONE, resumed.stderr.decode()
    got = _finals(Path(spec.out_dir))
    assert len(got) == 3
    _same(got, want)
    assert load_payload(Path(spec.out_dir) / "final-hier.pt")["model"]["fc.weight"].shape == (16, 48)
