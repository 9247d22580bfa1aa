"""Lockstep training: shared init and batch order, cell independence, determinism."""

from __future__ import annotations

from pathlib import Path

import torch

from hierconsole.engine.checkpoints import load_payload
from hierconsole.engine.trainer import FactorialTrainer
from tests.tiny import tiny_preset

from .conftest import make_spec, recorded, spec_preset


def _train(spec) -> list[dict]:
    events: list = []
    FactorialTrainer(spec, events.append).run()
    return recorded(events)


def _final_state(spec, arm: str) -> dict[str, torch.Tensor]:
    return load_payload(Path(spec.out_dir) / f"final-{arm}.pt")["model"]


def test_cells_share_initial_state_and_batch_order(tmp_path, tiny_fs, tiny_dir):
    spec = make_spec(tmp_path / "a", tiny_fs, tiny_dir)
    events = _train(spec)
    inits = {e["cell"]: e["init_sha256"] for e in events if e["kind"] == "init"}
    assert set(inits) == {"E_R", "H_R", "E_S", "H_S"}
    assert len(set(inits.values())) == 1
    assert {e["trainable_params"] for e in events if e["kind"] == "init"} == {48 * 32 + 32 + 64 + 32 * 8 + 8}
    per_epoch: dict[int, set[str]] = {}
    for e in events:
        if e["kind"] == "epoch":
            per_epoch.setdefault(e["epoch"], set()).add(e["batch_sha256"])
            assert e["updates"] == (260 // 32) * e["epoch"]
    assert sorted(per_epoch) == [1, 2, 3]
    assert all(len(h) == 1 for h in per_epoch.values())
    # A different epoch reshuffles: the batch order is not the same permutation every epoch.
    assert len({next(iter(h)) for h in per_epoch.values()}) == 3
    finals = [e for e in events if e["kind"] == "final"]
    assert all(e["reload_max_diff"] == 0.0 for e in finals)
    # The four cells really differ after training (geometry and loss matter).
    assert len({e["final_sha256"] for e in finals}) == 4


def test_a_cell_trained_alone_equals_the_same_cell_in_lockstep(tmp_path, tiny_fs, tiny_dir):
    together = make_spec(tmp_path / "together", tiny_fs, tiny_dir)
    _train(together)
    for arm in ("H_S", "E_R"):
        alone = make_spec(tmp_path / f"alone-{arm}", tiny_fs, tiny_dir, arms=(arm,))
        _train(alone)
        a, b = _final_state(alone, arm), _final_state(together, arm)
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), f"{arm}: {k} differs"


def test_training_is_bitwise_deterministic_and_seed_sensitive(tmp_path, tiny_fs, tiny_dir):
    first = _train(make_spec(tmp_path / "one", tiny_fs, tiny_dir, arms=("H_R", "E_S")))
    second = _train(make_spec(tmp_path / "two", tiny_fs, tiny_dir, arms=("H_R", "E_S")))
    other = _train(make_spec(tmp_path / "three", tiny_fs, tiny_dir, arms=("H_R", "E_S"), seed=7))

    def finals(events):
        return {e["cell"]: e["final_sha256"] for e in events if e["kind"] == "final"}

    assert finals(first) == finals(second)
    assert set(finals(first).values()).isdisjoint(finals(other).values())


def test_validation_best_is_an_auxiliary_record(tmp_path, tiny_fs, tiny_dir):
    spec = make_spec(tmp_path / "v", tiny_fs, tiny_dir, arms=("E_S",))
    events = _train(spec)
    vals = [e for e in events if e["kind"] == "val"]
    assert [e["epoch"] for e in vals] == [2, 3]  # every val_every epochs and at the end
    final = next(e for e in events if e["kind"] == "final")
    best = max(vals, key=lambda e: (e["score"], -e["epoch"]))
    assert final["best_epoch"] == best["epoch"]
    # The endpoint is the last epoch's model, whichever epoch validated best.
    assert (Path(spec.out_dir) / "final-E_S.pt").exists() and (Path(spec.out_dir) / "best-E_S.pt").exists()


def test_a_kept_candidate_equals_a_run_retrained_to_that_duration(tmp_path, tiny_fs, tiny_dir):
    """A selecting run keeps each candidate epoch's state instead of retraining every seed to the frozen
    duration: the state at epoch 2 of a 3-epoch run is bit-identical to a fresh 2-epoch run's endpoint."""
    selecting = spec_preset(**{"training.select_epoch": True, "training.selection_epochs": [1, 2, 3]})
    long = make_spec(tmp_path / "long", tiny_fs, tiny_dir, arms=("H_S", "E_R"), preset=selecting)
    _train(long)
    short = make_spec(tmp_path / "short", tiny_fs, tiny_dir, arms=("H_S", "E_R"), preset=tiny_preset(epochs=2, **{"training.val_every": 2}))
    _train(short)
    for arm in ("H_S", "E_R"):
        kept = load_payload(Path(long.out_dir) / f"candidate-{arm}-e2.pt")
        assert kept["epoch"] == 2
        retrained = _final_state(short, arm)
        assert kept["model"].keys() == retrained.keys()
        for k in retrained:
            assert torch.equal(kept["model"][k], retrained[k]), f"{arm}: {k} differs"
        assert sorted(p.name for p in Path(long.out_dir).glob(f"candidate-{arm}-*.pt")) == [
            f"candidate-{arm}-e{e}.pt" for e in (1, 2, 3)
        ]
