"""The trainer on a taxonomy of five levels: labels, the shuffle control's edges, validation of every
level, the hier score over the plan's levels, and the batched path equal to the reference."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from hierconsole.contract.events import EventKind
from hierconsole.datasets import FeatureSet
from hierconsole.engine.trainer import FactorialTrainer, selection_value, study_plan, training_labels
from hierconsole.levels import LevelPlan, Levels
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import hier_score

from .conftest import make_spec, recorded, spec_preset

NAMES = ("Species", "Genus", "Family", "Order", "Class")


def _deep(fs: FeatureSet) -> FeatureSet:
    """The tiny data's leaves under a five-level tree (leaf i -> i // 2 -> // 2 -> // 2 -> // 2)."""
    counts = [fs.taxonomy.n_leaves]
    for _ in range(4):
        counts.append(max(1, -(-counts[-1] // 2)))
    nodes = tuple(tuple(f"{name[0]}{i}" for i in range(n)) for name, n in zip(NAMES, counts, strict=True))
    parents = tuple(np.arange(counts[k]) // 2 for k in range(4))
    return replace(fs, taxonomy=Taxonomy(nodes, parents, NAMES))


@pytest.fixture(scope="module")
def deep_fs(tiny_fs: FeatureSet) -> FeatureSet:
    return _deep(tiny_fs)


def test_a_five_level_study_trains_validates_every_level_and_selects_by_the_plan(tmp_path, deep_fs, tiny_dir):
    levels = deep_fs.taxonomy.levels
    assert levels.codes == ("species", "genus", "family", "order", "class")
    preset = spec_preset()
    plan, training = study_plan(preset, levels)
    assert plan == LevelPlan.default(levels)
    assert training.level_weights == (1.0,) * 5  # the equal default broadcasts to the depth
    assert training.regression_targets == pytest.approx((0.2, 0.35, 0.5, 0.65, 0.8, 1.0))
    runs = {}
    for batched in (False, True):
        spec = make_spec(tmp_path / f"b{batched}", deep_fs, tiny_dir, batched=batched)
        events: list = []
        trainer = FactorialTrainer(spec, events.append, dtype=torch.float64, dataset=deep_fs)
        assert trainer.labels.shape[1] == 5
        trainer.run()
        runs[batched] = recorded(events)
    validations = [e for e in runs[False] if e["kind"] == EventKind.VAL]
    assert validations
    for e in validations:
        assert list(e["metrics"]) == list(levels.codes)
        maps = {code: m["mAP"] for code, m in e["metrics"].items()}
        assert e["score"] == hier_score(maps, levels.non_leaf) or np.isnan(e["score"])
    losses = {b: [e["train_loss"] for e in r if e["kind"] == "epoch"] for b, r in runs.items()}
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-9)


def test_training_labels_of_five_levels_follow_the_shuffle_edges_and_the_trained_subset(
    tmp_path, deep_fs, tiny_dir
):
    taxonomy = deep_fs.taxonomy
    levels = taxonomy.levels
    rng = np.random.default_rng(3)
    edges = {levels.edge_key(k): _onto(rng, taxonomy.counts[k], taxonomy.counts[k + 1]) for k in range(4)}
    assert list(edges) == ["species_genus", "genus_family", "family_order", "order_class"]
    np.savez(tmp_path / "shuffle.npz", **edges)
    spec = make_spec(tmp_path / "job", deep_fs, tiny_dir, train_taxonomy=str(tmp_path / "shuffle.npz"))
    labels = training_labels(spec, deep_fs)
    for i, leaf in enumerate(deep_fs.labels[:, 0]):  # the chain of the shuffled parents, row by row
        node = leaf
        expected = [node]
        for k in range(4):
            node = edges[levels.edge_key(k)][node]
            expected.append(node)
        assert labels[i].tolist() == expected
    subset = LevelPlan(levels, ("genus", "order"), ("species", "genus", "family"))
    assert np.array_equal(training_labels(spec, deep_fs, subset), labels[:, [0, 1, 2]])
    np.savez(tmp_path / "three.npz", leaf_middle=edges["species_genus"], middle_high=edges["genus_family"])
    with pytest.raises(ValueError, match="no edge species_genus, genus_family, family_order, order_class"):
        training_labels(replace(spec, train_taxonomy=str(tmp_path / "three.npz")), deep_fs)


def test_a_shuffle_edge_pointing_outside_the_level_above_is_refused(tmp_path, deep_fs, tiny_dir):
    # A -1 parent used to wrap round to the last genus silently; the taxonomy's own check refuses it.
    taxonomy = deep_fs.taxonomy
    edges = {key: p.copy() for key, p in zip(taxonomy.levels.edges, taxonomy.parents, strict=True)}
    edges["species_genus"][0] = -1
    np.savez(tmp_path / "shuffle.npz", **edges)
    spec = make_spec(tmp_path / "job", deep_fs, tiny_dir, train_taxonomy=str(tmp_path / "shuffle.npz"))
    with pytest.raises(ValueError, match="holds an index outside"):
        training_labels(spec, deep_fs)


def _onto(rng: np.random.Generator, n_child: int, n_parent: int) -> np.ndarray:
    """A random parent for each of n_child nodes, every parent holding at least one."""
    return rng.permutation(
        np.concatenate([np.arange(n_parent), rng.integers(0, n_parent, n_child - n_parent)])
    )


def test_selection_value_splits_the_metric_at_the_last_underscore_and_takes_the_hier_levels():
    metrics = {"species": {"mAP": 0.9}, "genus": {"mAP": 0.5, "R@5": 0.7}, "family": {"mAP": 0.25}}
    assert selection_value(metrics, "genus_R@5") == 0.7
    assert selection_value(metrics, "hier_mAP") == (0.0 + 0.5 + 0.25) / 2
    assert selection_value(metrics, "hier_mAP", ("family",)) == 0.25
    assert np.isnan(selection_value(metrics, "order_mAP"))
    assert Levels.of(NAMES).codes[1] == "genus"
