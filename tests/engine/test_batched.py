"""The batched engine against the per-cell reference: same masks, same clipping, same trajectory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from hierconsole.config import TrainingConfig
from hierconsole.engine import fused
from hierconsole.engine.batched import BatchedCells, FusedAdamW, cell_noise, clip_per_cell_
from hierconsole.engine.checkpoints import list_checkpoints, load_payload
from hierconsole.engine.geometry import TRAIN_CLIP, make_geometry
from hierconsole.engine.prototypes import initial_prototypes
from hierconsole.engine.trainer import (
    CellRng,
    FactorialTrainer,
    build_projector,
    cell_loss,
    embed,
    initial_state,
)
from hierconsole.errors import NoPositivePairsError

from .conftest import TINY_POINCARE, TINY_TRAINING, cells_for, make_spec, recorded, spec_preset

F64 = torch.float64


def _train(spec, dtype=torch.float32) -> tuple[list[dict], dict[str, dict[str, torch.Tensor]]]:
    events: list = []
    FactorialTrainer(spec, events.append, dtype=dtype).run()
    finals = {p.name: load_payload(p)["model"] for p in sorted(Path(spec.out_dir).glob("final-*.pt"))}
    return recorded(events), finals


def _history(events: list[dict]) -> dict[tuple[str, int], float]:
    return {(e["cell"], e["epoch"]): e["train_loss"] for e in events if e["kind"] == "epoch"}


@pytest.fixture(scope="module")
def float64_runs(tmp_path_factory, tiny_fs, tiny_dir):
    root = tmp_path_factory.mktemp("f64")
    return {
        batched: _train(make_spec(root / str(batched), tiny_fs, tiny_dir, batched=batched), F64)
        for batched in (False, True)
    }


def test_batched_training_equals_the_reference_in_float64(float64_runs):
    (ref_events, ref), (bat_events, bat) = float64_runs[False], float64_runs[True]
    assert ref.keys() == bat.keys() and len(ref) == 4
    for name in ref:
        assert list(ref[name]) == list(bat[name])  # a per-cell Projector state dict, keys in order
        for key, value in ref[name].items():
            assert bat[name][key].dtype == value.dtype
            torch.testing.assert_close(bat[name][key], value, rtol=0, atol=1e-9, msg=f"{name}:{key}")
    ref_h, bat_h = _history(ref_events), _history(bat_events)
    assert ref_h.keys() == bat_h.keys() and len(ref_h) == 12
    for k in ref_h:
        assert bat_h[k] == pytest.approx(ref_h[k], abs=1e-12)
    # Same events and audit inputs: shared init hash, update counts, batch order, exact reload.
    for kind in ("init", "final"):
        ref_ev = [e for e in ref_events if e["kind"] == kind]
        bat_ev = [e for e in bat_events if e["kind"] == kind]
        assert [e["cell"] for e in ref_ev] == [e["cell"] for e in bat_ev]
        if kind == "init":
            assert [e["init_sha256"] for e in ref_ev] == [e["init_sha256"] for e in bat_ev]
            assert [e["trainable_params"] for e in ref_ev] == [e["trainable_params"] for e in bat_ev]
        else:
            assert [e["updates"] for e in ref_ev] == [e["updates"] for e in bat_ev]
            assert all(e["reload_max_diff"] == 0.0 for e in bat_ev)
    batch_hashes = {
        (e["cell"], e["epoch"], e["batch_sha256"])
        for ev in (ref_events, bat_events)
        for e in ev
        if e["kind"] == "epoch"
    }
    assert len(batch_hashes) == 12


def test_batched_training_matches_the_reference_outputs_in_float32(tmp_path, tiny_fs, tiny_dir):
    # In float32 the fc1 bias (whose gradient is zero before BatchNorm, up to rounding) picks up different
    # rounding noise that AdamW normalises into steps of size ~lr; batch-statistics BatchNorm removes it
    # from the training outputs, so losses agree to rounding while that bias does not.
    preset = spec_preset(**{"training.lr": 5e-5})  # the protocol's learning rate, which sets the noise's size
    ref_events, ref = _train(make_spec(tmp_path / "ref", tiny_fs, tiny_dir, batched=False, preset=preset))
    bat_events, bat = _train(make_spec(tmp_path / "bat", tiny_fs, tiny_dir, batched=True, preset=preset))
    ref_h, bat_h = _history(ref_events), _history(bat_events)
    for k in ref_h:
        assert bat_h[k] == pytest.approx(ref_h[k], rel=1e-6)  # training losses: float32 rounding only
    x = torch.from_numpy(tiny_fs.features[:64])
    for spec in cells_for():
        outs = []
        for states in (ref, bat):
            m = build_projector(x.shape[1], spec, TINY_TRAINING, TINY_POINCARE)
            m.load_state_dict(states[f"final-{spec.arm}.pt"])
            outs.append(embed(m, x))
        # Eval-mode BatchNorm subtracts a running mean that lags the bias's random walk by a few steps of
        # ~lr, so evaluation embeddings carry that noise (~1e-4) on top of float32 rounding.
        torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=1e-3)


def _plain_cells(n: int, training: TrainingConfig, dtype=F64) -> BatchedCells:
    cells = BatchedCells(cells_for(), 24, training, TINY_POINCARE, torch.device("cpu"), dtype)
    init = initial_state(5, 24, training)
    cells.load([init] * n, [{"state": {}}] * n)
    return cells


def test_dropout_masks_are_the_reference_masks_and_differ_between_cells():
    cpu = torch.device("cpu")
    seeds = [11, 12, 13, 14]
    batched_rngs = [CellRng(cpu, s) for s in seeds]
    reference_rngs = [CellRng(cpu, s) for s in seeds]
    drop = nn.Dropout(0.3)
    for _ in range(3):  # the streams advance identically from draw to draw
        noise = cell_noise(batched_rngs, 16, 10, 0.3, F64, cpu)
        assert noise is not None and noise.shape == (4, 16, 10)
        blocks = noise.unbind(0)
        for rng, block in zip(reference_rngs, blocks, strict=True):
            x = torch.rand(16, 10, dtype=F64) + 0.5
            with rng.active():
                reference = drop(x)
            assert torch.equal(x * block, reference)
        assert len({tuple(b.flatten().tolist()) for b in blocks}) == 4
    assert all(torch.equal(a.state, b.state) for a, b in zip(batched_rngs, reference_rngs, strict=True))
    assert cell_noise(batched_rngs, 4, 3, 0.0, F64, cpu) is None  # p = 0 draws nothing, as nn.Dropout


def test_each_cell_is_clipped_by_its_own_norm():
    g = torch.Generator().manual_seed(3)
    params = [
        torch.zeros(3, 5, 4, dtype=F64, requires_grad=True),
        torch.zeros(3, 5, dtype=F64, requires_grad=True),
    ]
    for p, scale in zip(params, ([1e4], [1e-3]), strict=True):
        p.grad = torch.randn(p.shape, generator=g, dtype=F64) * 1e-3
        p.grad[0] *= scale[0] * 1e3  # cell 0: a huge gradient; cells 1 and 2 small
    before = [p.grad.clone() for p in params]
    norms = clip_per_cell_(params, 1.0)
    for cell in range(3):
        # The reference: clip_grad_norm_ over that cell's own parameters alone.
        own = [torch.zeros_like(b[cell], requires_grad=True) for b in before]
        for o, b in zip(own, before, strict=True):
            o.grad = b[cell].clone()
        total = torch.nn.utils.clip_grad_norm_(own, 1.0)
        assert norms[cell].item() == pytest.approx(total.item(), rel=1e-14)
        for o, p in zip(own, params, strict=True):
            torch.testing.assert_close(p.grad[cell], o.grad, rtol=1e-14, atol=0)
    assert norms[0] > 1.0 > norms[1]
    for p, b in zip(params, before, strict=True):
        assert torch.equal(p.grad[1:], b[1:])  # the small cells are untouched by cell 0's clipping


@pytest.mark.parametrize("shape", [(8, 16), (6, 5)])
def test_fused_adamw_on_the_stack_is_per_cell_adamw(shape):
    # AdamW is elementwise, so the stack's update is each cell's. The CPU kernel runs whole vectors and a
    # scalar tail that may round the last bit differently: with each cell's block a whole number of
    # vectors (the protocol's 768-256-32 widths) the bits agree; (6, 5) leaves a tail, so a few ulps.
    g = torch.Generator().manual_seed(4)
    stacked = nn.Parameter(torch.randn(3, *shape, generator=g, dtype=F64))
    singles = [nn.Parameter(stacked[i].detach().clone()) for i in range(3)]
    plain = [nn.Parameter(stacked[i].detach().clone()) for i in range(3)]
    opt = FusedAdamW([stacked], lr=1e-2, weight_decay=0.1)
    assert opt.state_dict()["state"] == {}  # like torch's, empty before the first step
    opt_single = [torch.optim.AdamW([p], lr=1e-2, weight_decay=0.1, fused=True) for p in singles]
    opt_plain = [torch.optim.AdamW([p], lr=1e-2, weight_decay=0.1) for p in plain]  # the reference's
    for _ in range(4):
        grad = torch.randn(3, *shape, generator=g, dtype=F64)
        stacked.grad = grad.clone()
        opt.step()
        for i in range(3):
            singles[i].grad, plain[i].grad = grad[i].clone(), grad[i].clone()
            opt_single[i].step()
            opt_plain[i].step()
    ours = opt.state_dict()
    exact = shape == (8, 16)
    for i in range(3):
        theirs = opt_single[i].state_dict()
        assert ours["param_groups"][0] == theirs["param_groups"][0]  # the same layout as torch's
        pairs = [(stacked[i], singles[i])]
        pairs += [
            (ours["state"][0][k] if k == "step" else ours["state"][0][k][i], v)
            for k, v in theirs["state"][0].items()
        ]
        for a, b in pairs:
            if exact:
                assert torch.equal(a, b)
            else:
                torch.testing.assert_close(a, b, rtol=1e-15, atol=0)
        torch.testing.assert_close(stacked[i], plain[i], rtol=0, atol=1e-14)


def _library_losses(
    t: torch.Tensor, labels: torch.Tensor, geometry, training: TrainingConfig, loss: str
) -> torch.Tensor:
    from hierconsole.contract.jobspec import CellSpec

    z = geometry.embed(t)
    d = geometry.pairwise(z, z, clip_max=TRAIN_CLIP)
    spec = CellSpec("X", geometry.name, loss, 0.3 if loss == "supcon" else None)
    return torch.stack([cell_loss(spec, d[i], labels, training) for i in range(t.shape[0])])


@pytest.mark.parametrize(
    ("geometry", "c"), [("euclidean", 1.0), ("poincare", 1.0), ("poincare", 2.0), ("poincare", 60.0)]
)
@pytest.mark.parametrize("loss", ["regression", "supcon"])
def test_closed_form_heads_and_losses_equal_autograd_through_the_library(geometry, c, loss):
    training = TrainingConfig(level_weights=(1.0, 0.5, 2.0))
    geo = make_geometry(geometry, c=c, r=0.4)
    assert fused.supported(geo)
    g = torch.Generator().manual_seed(6)
    t = torch.randn(2, 24, 5, generator=g, dtype=F64) * 2.0
    t[0, 3] *= 1e-7  # below the tangent-norm floor
    t[1, 4] = 0.0  # the zero vector
    labels = torch.randint(0, 3, (24, 3), generator=g)
    labels[:, 1] = labels[:, 0] // 2
    labels[:, 2] = labels[:, 1] // 2
    weights = torch.rand(2, generator=g, dtype=F64) + 0.5  # an upstream gradient per cell

    t_ref = t.clone().requires_grad_(True)
    expected = _library_losses(t_ref, labels, geo, training, loss)
    (expected * weights).sum().backward()

    tg = fused.BatchTargets.build(
        labels,
        F64,
        targets=training.regression_targets if loss == "regression" else None,
        level_weights=training.level_weights if loss == "supcon" else None,
    )
    d, back = fused.embed_and_distances(geo, t, TRAIN_CLIP)
    if loss == "regression":
        got, grad_d = fused.regression_value_grad(d, tg)
    else:
        got, grad_d = fused.supcon_value_grad(d, torch.full((2,), 0.3, dtype=F64), tg)
    grad_t = back(grad_d * weights.view(-1, 1, 1))
    torch.testing.assert_close(got, expected.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad_t, t_ref.grad, rtol=1e-9, atol=1e-12)
    if geometry == "poincare" and c == 60.0:
        assert (fused.poincare_embed(t, c, 0.4)[0].norm(dim=-1) > 0.99 / c**0.5).any()  # projx binds


def test_batched_cells_fused_equal_library_autograd_over_steps():
    training = replace(TINY_TRAINING, hidden=12, out_dim=6, dropout=0.2)
    runs = []
    for use_fused in (True, False):
        cells = _plain_cells(4, training)
        cells.use_fused = use_fused
        runs.append(_five_steps(cells))
    _same_runs(*runs)


def _five_steps(cells: BatchedCells) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
    """Five steps of four cells on random batches of a three-level tree: the losses and the end states."""
    rngs = [CellRng(torch.device("cpu"), s) for s in range(4)]
    g = torch.Generator().manual_seed(9)
    losses = []
    for _ in range(5):
        x = torch.randn(20, 24, generator=g, dtype=F64)
        y = torch.randint(0, 4, (20, 3), generator=g)
        y[:, 1], y[:, 2] = y[:, 0] // 2, y[:, 0] // 4
        losses.append(cells.step(x, y, rngs))
    return torch.stack(losses), [cells.cell_state(i) for i in range(4)]


def _same_runs(a: tuple, b: tuple) -> None:
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=1e-12)
    for sa, sb in zip(a[1], b[1], strict=True):
        for k in sa:
            torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=1e-9)


def test_per_cell_state_round_trips_bit_for_bit(tmp_path, tiny_fs, tiny_dir):
    spec = make_spec(tmp_path / "ck", tiny_fs, tiny_dir, batched=True, val=False)
    FactorialTrainer(spec, lambda e: None).run()
    (_, path), *_ = reversed(list_checkpoints(Path(spec.out_dir) / "checkpoints"))
    payload = torch.load(path, weights_only=True)  # tensors, ints and strings only
    assert payload["batched"] is True
    cells = payload["cells"]
    assert list(cells) == ["E_R", "H_R", "E_S", "H_S"]
    opt = cells["H_S"]["optimizer"]
    assert sorted(opt["state"]) == list(range(6)) and opt["param_groups"][0]["params"] == list(range(6))
    assert opt["state"][0]["exp_avg"].shape == cells["H_S"]["model"]["fc1.weight"].shape
    restored = BatchedCells(
        spec.cells, tiny_fs.dim, spec.preset.training, spec.preset.geometry.poincare, torch.device("cpu")
    )
    restored.load([cells[k]["model"] for k in cells], [cells[k]["optimizer"] for k in cells])
    for i, key in enumerate(cells):  # stacking and slicing again gives back the very same bits
        assert all(torch.equal(restored.cell_state(i)[k], v) for k, v in cells[key]["model"].items())
        again = restored.optimizer_state(i)["state"]
        for idx, entry in cells[key]["optimizer"]["state"].items():
            assert all(torch.equal(again[idx][name], value) for name, value in entry.items())
    final = load_payload(Path(spec.out_dir) / "final-H_S.pt")["model"]
    assert all(torch.equal(final[k], v) for k, v in cells["H_S"]["model"].items())


def test_batch_targets_from_host_labels_and_no_positive_pairs():
    g = torch.Generator().manual_seed(12)
    labels = torch.randint(0, 3, (16, 3), generator=g)
    labels[:, 1], labels[:, 2] = labels[:, 0] // 2, labels[:, 0] // 3
    training = TrainingConfig()
    device_side = fused.BatchTargets.build(
        labels, F64, targets=training.regression_targets, level_weights=(1.0, 1.0, 0.5)
    )
    host_side = fused.BatchTargets.build(
        labels, F64, targets=training.regression_targets, level_weights=(1.0, 1.0, 0.5), host_labels=labels.clone()
    )
    assert torch.equal(device_side.supcon_weight, host_side.supcon_weight)
    distinct = torch.arange(8).repeat(3, 1).T.contiguous()  # every sample its own leaf, middle and high
    tg = fused.BatchTargets.build(distinct, F64, targets=None, level_weights=(1.0, 1.0, 1.0))
    with pytest.raises(NoPositivePairsError):
        fused.supcon_value_grad(torch.rand(1, 8, 8, dtype=F64), torch.tensor([0.2], dtype=F64), tg)


@pytest.mark.parametrize("geometry", ["euclidean", "poincare"])
@pytest.mark.parametrize("loss", ["regression", "supcon"])
def test_closed_form_losses_of_seven_levels_equal_autograd_through_the_library(geometry, loss):
    from hierconsole.engine.losses import regression_loss, taxonomy_supcon_loss

    geo = make_geometry(geometry, c=1.0, r=0.4)
    g = torch.Generator().manual_seed(17)
    t = torch.randn(3, 28, 5, generator=g, dtype=F64) * 2.0
    leaf = torch.randint(0, 40, (28,), generator=g)
    labels = torch.stack([leaf // 2**lvl for lvl in range(7)], dim=1)  # 40, 20, 10, 5, 3, 2, 1 nodes
    labels[:, 3] = labels[:, 2]  # level 4 has no strict positive: SupCon skips it and renormalises
    labels[-1] = 1000  # a sample related to no other
    targets = (0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9, 1.3)
    level_weights = (1.0, 0.5, 2.0, 4.0, 0.0, 1.5, 0.25)
    tau = torch.tensor([0.3, 0.5, 0.2], dtype=F64)
    upstream = torch.rand(3, generator=g, dtype=F64) + 0.5

    t_ref = t.clone().requires_grad_(True)
    d_ref = geo.pairwise(geo.embed(t_ref), geo.embed(t_ref), clip_max=TRAIN_CLIP)
    if loss == "regression":
        expected = regression_loss(d_ref, labels, targets)
    else:
        expected = taxonomy_supcon_loss(d_ref, labels, tau, level_weights)
    (expected * upstream).sum().backward()

    tg = fused.BatchTargets.build(
        labels,
        F64,
        targets=targets if loss == "regression" else None,
        level_weights=level_weights if loss == "supcon" else None,
        host_labels=labels.clone(),
    )
    d, back = fused.embed_and_distances(geo, t, TRAIN_CLIP)
    got, grad_d = fused.regression_value_grad(d, tg) if loss == "regression" else fused.supcon_value_grad(d, tau, tg)
    torch.testing.assert_close(got, expected.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(back(grad_d * upstream.view(-1, 1, 1)), t_ref.grad, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="level_weights must give 7 values"):
        fused.BatchTargets.build(labels, F64, targets=None, level_weights=(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="targets must give 8 values"):
        fused.BatchTargets.build(labels, F64, targets=(0.2, 0.5, 0.8, 1.0), level_weights=None)


def test_batched_training_of_any_components_equals_the_reference_in_float64(tmp_path, tiny_fs, tiny_dir):
    # The Lorentz and product heads, flat SupCon and soft-label CE (with its leaf prototypes) train through
    # the library's autograd on the batched path (no closed form), the reference trains each cell alone:
    # the same trajectory.
    arms = ("L_R", "M_S", "E_F", "L_F", "E_C", "H_C", "L_C")
    runs = {
        batched: _train(make_spec(tmp_path / str(batched), tiny_fs, tiny_dir, arms=arms, batched=batched), F64)
        for batched in (False, True)
    }
    (ref_events, ref), (bat_events, bat) = runs[False], runs[True]
    assert sorted(ref) == sorted(f"final-{a}.pt" for a in arms) and ref.keys() == bat.keys()
    for name in ref:
        for key, value in ref[name].items():
            torch.testing.assert_close(bat[name][key], value, rtol=0, atol=1e-9, msg=f"{name}:{key}")
    ref_h, bat_h = _history(ref_events), _history(bat_events)
    assert ref_h.keys() == bat_h.keys() and len(ref_h) == 3 * len(arms)
    for k in ref_h:
        assert bat_h[k] == pytest.approx(ref_h[k], abs=1e-12)
    inits = {e["init_sha256"] for e in bat_events if e["kind"] == "init"}
    assert len(inits) == 1  # every cell of the seed from one initial state
    # The leaf prototypes are the soft-label cells' own: counted apart from the projector (which stays the
    # size of every cell's), trained alike on both engines and written to the checkpoints by both.
    n_leaves, out_dim = tiny_fs.taxonomy.n_leaves, TINY_TRAINING.out_dim
    for events in (ref_events, bat_events):
        inits = {e["cell"]: e for e in events if e["kind"] == "init"}
        assert {c: e["objective_params"] for c, e in inits.items()} == {
            a: n_leaves * out_dim if a.endswith("_C") else 0 for a in arms
        }
        assert len({e["trainable_params"] for e in inits.values()}) == 1
    last = [load_payload(list_checkpoints(tmp_path / str(b) / "job" / "checkpoints")[-1][1])["cells"] for b in (False, True)]
    start = initial_prototypes(42, n_leaves, out_dim)
    for arm in arms:
        assert ("prototypes" in last[0][arm]) == ("prototypes" in last[1][arm]) == arm.endswith("_C")
        if arm.endswith("_C"):
            ref_p, bat_p = last[0][arm]["prototypes"], last[1][arm]["prototypes"]
            torch.testing.assert_close(bat_p["value"], ref_p["value"], rtol=0, atol=1e-9)
            for name in ("exp_avg", "exp_avg_sq", "step"):
                torch.testing.assert_close(bat_p["optimizer"][name], ref_p["optimizer"][name], rtol=0, atol=1e-9)
            assert (ref_p["value"] - start).abs().max() > 1e-3  # they did learn


def test_flat_supcon_cells_take_the_closed_form_and_equal_autograd_over_steps():
    training = replace(TINY_TRAINING, hidden=12, out_dim=6, dropout=0.2)
    arms = ("E_R", "H_S", "E_F", "H_F")
    runs = []
    for use_fused in (True, False):
        cells = BatchedCells(cells_for(arms), 24, training, TINY_POINCARE, torch.device("cpu"), F64)
        assert cells.use_fused  # Euclidean and Poincaré heads, regression and both SupCons: all closed form
        cells.load([initial_state(5, 24, training)] * 4, [{"state": {}}] * 4)
        cells.use_fused = use_fused
        runs.append(_five_steps(cells))
    _same_runs(*runs)
    lorentz = BatchedCells(cells_for(("E_F", "L_F")), 24, training, TINY_POINCARE, torch.device("cpu"), F64)
    assert not lorentz.use_fused  # no closed form for the Lorentz head: the whole stack takes autograd
