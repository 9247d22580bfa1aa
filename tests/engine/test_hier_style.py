"""The HIER-style cell (engine.hier_style): each piece against a plain float64 re-implementation written here
with loops, then the cell inside a real job: deterministic, identical on both engines, and bit-identical
after a SIGKILL and a resume."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from hierconsole.config.preset import HierConfig
from hierconsole.contract.exit_status import EXIT_DONE
from hierconsole.contract.jobspec import CellSpec
from hierconsole.engine import checkpoints, hier_style
from hierconsole.engine.checkpoints import load_payload
from hierconsole.engine.geometry import TRAIN_CLIP
from hierconsole.engine.hier_style import (
    GumbelStream,
    HierBall,
    HierObjective,
    conformal_gradient,
    noise_seeds,
    proxy_anchor_loss,
    reciprocal_triplets,
    triplet_ancestor_loss,
)
from hierconsole.engine.trainer import FAULT_ENV, FactorialTrainer
from hierconsole.vocabulary import HIER_STYLE, HIER_STYLE_LOSS, POINCARE
from tests.engine.oracles import gumbel_noise

from .conftest import cells_for, make_spec, spec_preset

HIER_CELL = CellSpec(HIER_STYLE, POINCARE, HIER_STYLE_LOSS)
# Small HIER settings so a job takes seconds; the defaults are tested where they are defined. These tests
# hold the protocol-matched recipe (the authors' recipe: tests/engine/test_hier_recipe.py).
CHEAP = {
    "baselines.hier.recipe": "matched",
    "baselines.hier.proxies": 12,
    "baselines.hier.triplets_per_anchor": 3,
    "baselines.hier.topk": 4,
}


# -- plain references ---------------------------------------------------------------------------------


def np_proxy_anchor(z, leaf, proxies, alpha, margin):
    z = np.asarray(z, np.float64)
    p = np.asarray(proxies, np.float64)
    pos_terms, neg_terms = [], []
    for c in range(len(p)):
        pos_sum, neg_sum, has_pos = 0.0, 0.0, False
        for i in range(len(z)):
            cos = z[i] @ p[c] / (np.linalg.norm(z[i]) * np.linalg.norm(p[c]))
            if leaf[i] == c:
                has_pos = True
                pos_sum += math.exp(-alpha * (cos - margin))
            else:
                neg_sum += math.exp(alpha * (cos + margin))
        if has_pos:
            pos_terms.append(math.log(1 + pos_sum))
        neg_terms.append(math.log(1 + neg_sum))
    return sum(pos_terms) / len(pos_terms) + sum(neg_terms) / len(p)


def np_triplet_loss(dist, i, j, k, g1, g2, tau, margin):
    dist = np.asarray(dist, np.float64)
    total = 0.0
    for t in range(len(i)):
        a, b, c = dist[i[t]], dist[j[t]], dist[k[t]]
        lca_ij = int(np.argmax([-max(a[p], b[p]) / tau + g1[t, p] for p in range(len(a))]))
        lca_ijk = int(np.argmax([-max(a[p], b[p], c[p]) / tau + g2[t, p] for p in range(len(a))]))
        if lca_ij == lca_ijk:
            continue
        total += max(0.0, a[lca_ij] - a[lca_ijk] + margin)
        total += max(0.0, b[lca_ij] - b[lca_ijk] + margin)
        total += max(0.0, c[lca_ijk] - c[lca_ij] + margin)
    return total / len(i)


def np_reciprocal(sim, topk):
    """[N, N] booleans: j in i's top-k and i in j's top-k (self included in the ranking), j != i."""
    n = len(sim)
    top = [set(np.argsort(-sim[r], kind="stable")[:topk].tolist()) for r in range(n)]
    return np.array([[r != c and c in top[r] and r in top[c] for c in range(n)] for r in range(n)])


def np_poincare_dist(x, y, c):
    """2/sqrt(c) artanh(sqrt(c) |(-x) (+) y|), Möbius addition written out."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    mx = -x
    xy, x2, y2 = mx @ y, mx @ mx, y @ y
    num = (1 + 2 * c * xy + c * y2) * mx + (1 - c * x2) * y
    den = 1 + 2 * c * xy + c * c * x2 * y2
    return 2 / math.sqrt(c) * math.atanh(math.sqrt(c) * np.linalg.norm(num / den))


def np_ball(t, c, clip_r):
    t = np.asarray(t, np.float64)
    n = np.linalg.norm(t) + 1e-5
    t = t * min(1.0, clip_r / n)
    m = np.linalg.norm(t)
    return math.tanh(math.sqrt(c) * m) * t / (math.sqrt(c) * m)


# -- the pieces ---------------------------------------------------------------------------------------


def test_proxy_anchor_matches_loops():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(9, 5, generator=g, dtype=torch.float64)
    proxies = torch.randn(6, 5, generator=g, dtype=torch.float64)
    leaf = torch.tensor([0, 0, 1, 3, 3, 3, 4, 1, 0])  # class 2 and 5 have no positive in the batch
    for alpha, margin in ((32.0, 0.1), (4.0, 0.0)):
        got = proxy_anchor_loss(z, leaf, proxies, alpha, margin).item()
        assert got == pytest.approx(np_proxy_anchor(z, leaf.tolist(), proxies, alpha, margin), rel=1e-12)


def authors_term(dist, i, j, k, g1, g2, tau, margin):
    """HIER's hierarchical term transcribed plainly from the method (the authors' compute_gHHC): whole
    [T, P] tensors, a hard Gumbel-softmax (tau 1) with straight-through gradients over the given noise,
    and autograd for the gradients."""

    def hard_gumbel(logits, g):
        soft = torch.softmax(logits + g, dim=1)
        index = soft.argmax(dim=1)
        hard = torch.nn.functional.one_hot(index, logits.shape[1]).to(soft.dtype)
        return hard - soft.detach() + soft, index

    max_ij = torch.maximum(dist[i], dist[j])
    y_ij, idx_ij = hard_gumbel(-max_ij / tau, g1)
    max_ijk = torch.maximum(dist[k], max_ij)
    y_ijk, idx_ijk = hard_gumbel(-max_ijk / tau, g2)
    loss = (
        torch.relu((dist[i] * y_ij).sum(1) - (dist[i] * y_ijk).sum(1) + margin)
        + torch.relu((dist[j] * y_ij).sum(1) - (dist[j] * y_ijk).sum(1) + margin)
        + torch.relu((dist[k] * y_ijk).sum(1) - (dist[k] * y_ij).sum(1) + margin)
    )
    return (loss * (idx_ij != idx_ijk).to(loss.dtype)).mean()


def _triplet_case(n, p, t, dtype, seed, ties=False):
    g = torch.Generator().manual_seed(seed)
    dist = torch.rand(n, p, generator=g, dtype=torch.float64) * 3
    if ties:  # a coarse grid of distances, so the maxima tie often (torch.maximum splits a tie's gradient)
        dist = (dist * 4).round() / 4
    i = torch.randint(0, n, (t,), generator=g)
    j = (i + torch.randint(1, n, (t,), generator=g)) % n
    k = (i + torch.randint(1, n, (t,), generator=g)) % n
    return dist.to(dtype), (i, j, k)


@pytest.mark.parametrize(
    ("dtype", "tol", "ties"),
    [(torch.float64, 1e-10, False), (torch.float32, 1e-5, False), (torch.float32, 1e-5, True)],
)
def test_triplet_ancestor_loss_and_its_gradient_match_the_authors_term(dtype, tol, ties):
    # 2,000 triplets x 64 proxies: two row blocks, so the block-by-block noise and sums are exercised.
    dist, (i, j, k) = _triplet_case(30, 64, 2000, dtype, seed=1, ties=ties)
    assert i.numel() * 64 > hier_style.ROW_BLOCK_ELEMENTS
    for tau, margin in ((0.1, 0.1), (1.0, 0.5)):
        seeds = (11, 12)
        fast_in = dist.clone().requires_grad_(True)
        fast = triplet_ancestor_loss(fast_in, (i, j, k), GumbelStream(seeds, 64), tau, margin)
        fast.backward()
        g1, g2 = gumbel_noise(len(i), 64, seeds, dtype)
        ref_in = dist.clone().requires_grad_(True)
        ref = authors_term(ref_in, i, j, k, g1, g2, tau, margin)
        ref.backward()
        assert ref.item() > 0 and ref_in.grad.abs().sum() > 0  # not vacuous
        assert fast.item() == pytest.approx(ref.item(), rel=tol)
        torch.testing.assert_close(fast_in.grad, ref_in.grad, rtol=tol, atol=tol * ref_in.grad.abs().max().item())


def test_triplet_ancestor_loss_matches_loops():
    dist, (i, j, k) = _triplet_case(7, 10, 8, torch.float64, seed=2)
    g1, g2 = gumbel_noise(len(i), 10, (5, 6), torch.float64)
    for tau, margin in ((0.1, 0.1), (1.0, 0.5)):
        got = triplet_ancestor_loss(dist, (i, j, k), GumbelStream((5, 6), 10), tau, margin).item()
        want = np_triplet_loss(dist.numpy(), i, j, k, g1.numpy(), g2.numpy(), tau, margin)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
    empty = torch.zeros(0, dtype=torch.int64)
    zero = triplet_ancestor_loss(dist, (empty, empty, empty), GumbelStream((5, 6), 10), 0.1, 0.1)
    assert zero.item() == 0.0


def test_triplet_ancestor_loss_is_bit_identical_run_to_run():
    dist, triplets = _triplet_case(40, 96, 3000, torch.float32, seed=3)
    runs = []
    for _ in range(2):
        x = dist.clone().requires_grad_(True)
        loss = triplet_ancestor_loss(x, triplets, GumbelStream((7, 8), 96), 0.1, 0.1)
        loss.backward()
        runs.append((loss.detach(), x.grad))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


def test_gumbel_stream_is_standard_gumbel_whatever_the_blocks():
    # 7 columns: blocks of 1 and 99 rows are an odd number of 32-bit draws, so the carried half is exercised.
    whole = gumbel_noise(300, 7, (1, 2))
    stream = GumbelStream((1, 2), 7)
    parts = [stream.next(n) for n in (1, 99, 200)]
    for choice in range(2):
        assert torch.equal(torch.cat([p[choice] for p in parts]).log().neg(), whole[choice])
    assert not torch.equal(whole[0], whole[1])  # the two choices draw independent noise
    log_u = GumbelStream((1, 2), 7).log_uniforms(300)[0]
    assert torch.equal(log_u, -torch.cat([p[0] for p in parts]))
    # u = (2m + 1) 2^-24 for a 23-bit m: never 0 or 1, so log(u) is finite and strictly negative
    u = log_u.double().exp()
    assert (log_u < 0).all() and torch.isfinite(log_u).all()
    m = (u * 2**24 - 1) / 2
    assert torch.allclose(m, m.round(), atol=1e-3) and m.min() >= 0 and m.max() < 2**23
    g = gumbel_noise(1000, 1000, (3, 4))[0].double()
    assert torch.isfinite(g).all()
    assert g.mean().item() == pytest.approx(0.5772157, abs=0.01)  # Euler-Mascheroni
    assert g.var().item() == pytest.approx(math.pi**2 / 6, rel=0.01)
    # P(g <= x) = exp(-exp(-x)) at a few quantiles
    for x in (-1.0, 0.0, 2.0):
        assert (g <= x).double().mean().item() == pytest.approx(math.exp(-math.exp(-x)), abs=0.003)


def test_reciprocal_triplets_match_loops():
    g = torch.Generator().manual_seed(2)
    sim = torch.rand(11, 11, generator=g, dtype=torch.float64)
    sim = (sim + sim.T) / 2 + torch.eye(11)
    topk, per_anchor = 4, 6
    draw = torch.Generator().manual_seed(99)
    a, p, n = reciprocal_triplets(sim, topk, per_anchor, draw)
    recip = np_reciprocal(sim.numpy(), topk)
    anchors = [r for r in range(11) if recip[r].sum() > 1 and (~recip[r]).sum() - 1 > 0]
    assert sorted(set(a.tolist())) == anchors and len(a) == len(anchors) * per_anchor
    # The same uniform draws, in the documented order, pick the same members by rank.
    same = torch.Generator().manual_seed(99)
    u_pos = torch.rand((len(anchors), per_anchor), generator=same, dtype=torch.float64).numpy()
    u_neg = torch.rand((len(anchors), per_anchor), generator=same, dtype=torch.float64).numpy()
    want_p, want_n = [], []
    for row, r in enumerate(anchors):
        positives = [c for c in range(11) if recip[r, c]]
        negatives = [c for c in range(11) if c != r and not recip[r, c]]
        want_p += [positives[int(u * len(positives))] for u in u_pos[row]]
        want_n += [negatives[int(u * len(negatives))] for u in u_neg[row]]
    assert p.tolist() == want_p and n.tolist() == want_n
    assert not (a == n).any()


def test_ball_head_and_its_gradient():
    ball = HierBall(c=0.1, clip_r=2.3)
    t = torch.tensor([[0.3, -0.2, 0.1], [4.0, 3.0, 0.0]], dtype=torch.float64)
    x = ball.embed(t)
    for row in range(2):
        np.testing.assert_allclose(x[row].numpy(), np_ball(t[row].numpy(), 0.1, 2.3), rtol=1e-9)
    assert x.norm(dim=-1).max() <= ball.bound + 1e-12  # the clipped point reaches the bound
    d = ball.pairwise(x, clip_max=1e6)
    assert d[0, 1].item() == pytest.approx(np_poincare_dist(x[0].numpy(), x[1].numpy(), 0.1), rel=1e-9)
    # The conformal rescaling of the gradient: d/dx of <x, w> becomes w (1 - c|x|^2)^2 / 4.
    p = torch.tensor([[0.5, 1.0, -0.5]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    (conformal_gradient(p, 0.1) * w).sum().backward()
    scale = (1 - 0.1 * (0.25 + 1 + 0.25)) ** 2 / 4
    np.testing.assert_allclose(p.grad.numpy(), (w * scale).numpy(), rtol=1e-12)


def test_objective_is_the_weighted_sum_of_its_terms():
    config = HierConfig(proxies=7, topk=3, triplets_per_anchor=4, hier_weight=0.5, anchor_weight=1.0)
    ball = HierBall(config.c, config.clip_r)
    obj = HierObjective(config, n_classes=5, dim=4, seed=3, ball=ball).double()
    g = torch.Generator().manual_seed(4)
    z = ball.embed(torch.randn(10, 4, generator=g, dtype=torch.float64))
    leaf = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 4, 0])
    state = obj.generator.get_state()
    got = obj(z, leaf).item()

    # Rebuild every input the objective used from the documented draw order, then the plain references.
    draw = torch.Generator()
    draw.set_state(state)
    lcas = np.stack([np_ball(t, config.c, config.clip_r) for t in obj.hyperbolic_proxies.detach().numpy()])
    nodes = np.concatenate([z.detach().numpy(), lcas])
    dist = np.array([[0.0 if a == b else np_poincare_dist(nodes[a], nodes[b], config.c) for b in range(17)] for a in range(17)])
    sim = np.exp(-dist[:10, :10]) + (leaf.numpy()[:, None] == leaf.numpy()[None, :])
    total = 0.0
    for part, s in ((dist[:10, 10:], sim), (dist[10:, 10:], np.exp(-dist[10:, 10:]))):
        i, j, k = reciprocal_triplets(torch.from_numpy(s), config.topk, config.triplets_per_anchor, draw)
        g1, g2 = gumbel_noise(len(i), 7, noise_seeds(draw), torch.float64)
        total += np_triplet_loss(part, i, j, k, g1.numpy(), g2.numpy(), config.tau, config.margin)
    anchor = np_proxy_anchor(z.detach().numpy(), leaf.tolist(), obj.class_proxies.detach().numpy(), 32.0, 0.1)
    assert got == pytest.approx(anchor + 0.5 * total, rel=1e-7)


def test_objective_gradients_match_the_authors_term_through_the_ball():
    # float32, as the cell trains: the gradients reaching the projector's output and the hyperbolic proxies
    # through the ball, the pairwise distances and the HIER term, against the plain transcription.
    config = HierConfig(proxies=40, topk=5, triplets_per_anchor=6)
    ball = HierBall(config.c, config.clip_r)
    obj = HierObjective(config, n_classes=6, dim=8, seed=5, ball=ball)
    g = torch.Generator().manual_seed(6)
    t = torch.randn(24, 8, generator=g).requires_grad_(True)
    leaf = torch.randint(0, 6, (24,), generator=g)
    state = obj.generator.get_state()
    obj(ball.embed(t), leaf).backward()
    fast = (t.grad.clone(), obj.hyperbolic_proxies.grad.clone(), obj.class_proxies.grad.clone())

    t.grad, obj.hyperbolic_proxies.grad, obj.class_proxies.grad = None, None, None
    draw = torch.Generator()
    draw.set_state(state)
    z, lcas = ball.embed(t), ball.embed(obj.hyperbolic_proxies)
    dist = ball.pairwise(torch.cat([z, lcas]), clip_max=TRAIN_CLIP)
    sim = torch.exp(-dist[:24, :24]).detach() + (leaf[None] == leaf[:, None]).float()
    term = 0.0
    for part, s in ((dist[:24, 24:], sim), (dist[24:, 24:], torch.exp(-dist[24:, 24:]).detach())):
        i, j, k = reciprocal_triplets(s, config.topk, config.triplets_per_anchor, draw)
        g1, g2 = gumbel_noise(len(i), config.proxies, noise_seeds(draw))
        term = term + authors_term(part, i, j, k, g1, g2, config.tau, config.margin)
    anchor = proxy_anchor_loss(z, leaf, obj.class_proxies, config.anchor_alpha, config.anchor_margin)
    (anchor + config.hier_weight * term).backward()
    plain = (t.grad, obj.hyperbolic_proxies.grad, obj.class_proxies.grad)
    assert obj.hyperbolic_proxies.grad.abs().sum() > 0
    for got, want in zip(fast, plain, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * want.abs().max().item())


def test_hier_defaults_are_the_papers():
    c = HierConfig()
    assert (c.proxies, c.c, c.clip_r, c.margin, c.tau, c.topk, c.triplets_per_anchor) == (512, 0.1, 2.3, 0.1, 0.1, 20, 50)
    assert (c.hier_weight, c.anchor_weight, c.anchor_alpha, c.anchor_margin) == (0.5, 1.0, 32.0, 0.1)


# -- the cell in a job --------------------------------------------------------------------------------


def _hier_spec(folder: Path, fs, fs_dir: Path, **changes):
    spec = make_spec(folder, fs, fs_dir, preset=spec_preset(**CHEAP), **changes)
    spec = replace(spec, cells=(*cells_for(("E_R", "H_S")), HIER_CELL))
    spec.write(Path(spec.out_dir) / "spec.json")
    return spec


def _finals(folder: Path) -> dict[str, dict[str, torch.Tensor]]:
    return {p.name: load_payload(p)["model"] for p in sorted(folder.glob("final-*.pt"))}


def _train(spec) -> tuple[dict, list]:
    got: list = []
    FactorialTrainer(spec, got.append).run()
    return _finals(Path(spec.out_dir)), got


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        for key, value in a[name].items():
            assert torch.equal(value, b[name][key]), f"{name}:{key}"


def test_hier_cell_is_deterministic_and_shares_init_and_batches(tmp_path, tiny_fs, tiny_dir):
    first, events = _train(_hier_spec(tmp_path / "a", tiny_fs, tiny_dir))
    second, _ = _train(_hier_spec(tmp_path / "b", tiny_fs, tiny_dir))
    _same(first, second)
    per_cell, _ = _train(_hier_spec(tmp_path / "c", tiny_fs, tiny_dir, batched=False))
    # The HIER-style cell is stepped the same way on both engines, so its weights agree bit for bit.
    assert torch.equal(per_cell["final-hier.pt"]["fc2.weight"], first["final-hier.pt"]["fc2.weight"])
    inits = {e.cell: e for e in events if type(e).__name__ == "Init"}
    assert inits["hier"].init_sha256 == inits["E_R"].init_sha256
    assert inits["hier"].trainable_params == inits["E_R"].trainable_params
    assert (inits["hier"].geometry, inits["hier"].loss) == (POINCARE, HIER_STYLE_LOSS)
    epochs = [e for e in events if type(e).__name__ == "Epoch"]
    for epoch in (1, 2, 3):
        rows = [e for e in epochs if e.epoch == epoch]
        assert len({e.batch_sha256 for e in rows}) == 1 and len({e.updates for e in rows}) == 1
    finals = {e.cell: e for e in events if type(e).__name__ == "Final"}
    assert finals["hier"].reload_max_diff == 0.0
    hier_losses = [e.train_loss for e in epochs if e.cell == "hier"]
    assert all(math.isfinite(v) for v in hier_losses) and hier_losses[-1] < hier_losses[0]


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


@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical_with_the_hier_cell(tmp_path, tiny_fs, tiny_dir):
    ref = _hier_spec(tmp_path / "ref", tiny_fs, tiny_dir)
    done = _worker(Path(ref.out_dir) / "spec.json")
    assert done.returncode == EXIT_DONE, done.stderr.decode()
    spec = _hier_spec(tmp_path / "job", tiny_fs, tiny_dir)
    spec_path = Path(spec.out_dir) / "spec.json"
    killed = _worker(spec_path, "3:2")
    assert killed.returncode == -signal.SIGKILL
    assert [e for e, _ in checkpoints.list_checkpoints(Path(spec.out_dir) / "checkpoints")] == [1, 2]
    resumed = _worker(spec_path)
    assert resumed.returncode == EXIT_DONE, resumed.stderr.decode()
    assert '"kind":"resume"' in (Path(spec.out_dir) / "events.jsonl").read_text()
    got, want = _finals(Path(spec.out_dir)), _finals(Path(ref.out_dir))
    assert len(got) == 3
    _same(got, want)
