"""The semantic-alignment control (paper S9): a development-only, structure-preserving taxonomy shuffle
that training fits while validation and test read the true taxonomy."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from hierconsole.contract import layout
from hierconsole.contract.events import Validation
from hierconsole.datasets import FeatureSet
from hierconsole.engine import checkpoints
from hierconsole.engine.retrieval import evaluate
from hierconsole.engine.trainer import FactorialTrainer, build_projector, embed
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.read.audits import stored_audits
from hierconsole.study.run.lifecycle import (
    RECORD_FORMAT,
    _taxonomy_shuffle,
    create_study,
    read_record,
    recorded_study,
    restore_study,
)
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.taxonomy import Taxonomy, development_shuffle, min_fixed_points
from hierconsole.vocabulary import MAP, hier_score
from tests.engine.conftest import make_spec
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # worker processes


def _taxonomy(leaf_middle, middle_high) -> Taxonomy:
    return Taxonomy.three(
        leaves=tuple(f"l{i}" for i in range(len(leaf_middle))),
        middles=tuple(f"m{i}" for i in range(len(middle_high))),
        highs=tuple(f"h{i}" for i in range(max(middle_high) + 1)),
        leaf_middle=leaf_middle,
        middle_high=middle_high,
    )


def _random_taxonomy(rng, n_leaves, n_middles, n_highs) -> Taxonomy:
    lm = np.concatenate([np.arange(n_middles), rng.integers(0, n_middles, n_leaves - n_middles)])
    mh = np.concatenate([np.arange(n_highs), rng.integers(0, n_highs, n_middles - n_highs)])
    return _taxonomy(rng.permutation(lm), rng.permutation(mh))


@pytest.mark.parametrize("seed", range(6))
def test_development_shuffle_keeps_group_sizes_reaches_the_minimum_and_leaves_test_groups(seed):
    rng = np.random.default_rng(seed)
    tax = _random_taxonomy(rng, 80, 30, 5)
    # Middle-disjoint, as the NABirds Parent-disjoint protocol: a third of the middles are test-only.
    test_middles = rng.choice(30, 10, replace=False)
    dev_leaves = np.flatnonzero(~np.isin(tax.parents[0], test_middles))
    result = development_shuffle(tax, dev_leaves, seed=seed)
    new = result.taxonomy
    dev_middles = np.setdiff1d(np.arange(30), test_middles)
    assert result.dev_nodes[0].tolist() == dev_leaves.tolist()
    assert result.dev_nodes[1].tolist() == dev_middles.tolist()
    # The multiset of classes per middle group and of middles per high group is preserved.
    assert (np.bincount(new.parents[0], minlength=30) == np.bincount(tax.parents[0], minlength=30)).all()
    assert (np.bincount(new.parents[1], minlength=5) == np.bincount(tax.parents[1], minlength=5)).all()
    # Test-only groups never move; development leaves stay among development middles.
    test_leaves = np.setdiff1d(np.arange(80), dev_leaves)
    assert (new.parents[0][test_leaves] == tax.parents[0][test_leaves]).all()
    assert (new.parents[1][test_middles] == tax.parents[1][test_middles]).all()
    assert np.isin(new.parents[0][dev_leaves], dev_middles).all()
    # Fixed points: the minimum the development group sizes allow, counted independently.
    leaf_fixed = int((new.parents[0][dev_leaves] == tax.parents[0][dev_leaves]).sum())
    middle_fixed = int((new.parents[1][dev_middles] == tax.parents[1][dev_middles]).sum())
    assert (result.fixed[0], result.fixed[1]) == (leaf_fixed, middle_fixed)
    assert leaf_fixed == result.fixed_min[0] == min_fixed_points(tax.parents[0][dev_leaves])
    assert middle_fixed == result.fixed_min[1] == min_fixed_points(tax.parents[1][dev_middles])
    assert development_shuffle(tax, dev_leaves, seed=seed).sha256 == result.sha256 != tax.sha256()


def test_development_fixed_points_match_the_brute_force_minimum_and_differ_from_the_whole_tree():
    # m0..m3 under h0 (dominant), m4 under h1, m5 (test-only) under h1: five development middles.
    tax = _taxonomy([0, 0, 1, 1, 2, 3, 4, 5], [0, 0, 0, 0, 1, 1])
    dev_leaves = np.arange(7)  # l7 (in m5) is test-only
    dev_mh = tax.parents[1][:5].tolist()
    best = min(sum(a == b for a, b in zip(p, dev_mh, strict=True)) for p in itertools.permutations(dev_mh))
    assert best == 3  # 2 * 4 - 5; over the whole tree (4 of 6 under h0) it would be 2
    assert min_fixed_points(tax.parents[1]) == 2
    for seed in range(5):
        result = development_shuffle(tax, dev_leaves, seed=seed)
        assert result.fixed[1] == best
        assert result.taxonomy.parents[0][7] == 5 and result.taxonomy.parents[1][5] == 1


def test_validation_reads_the_true_taxonomy(tmp_path, tiny_fs):
    tiny_dir = tmp_path / "tiny"
    tiny_fs.save(tiny_dir)
    train = np.flatnonzero(tiny_fs.split == 0)
    shuffle = development_shuffle(tiny_fs.taxonomy, tiny_fs.leaf[train], seed=7)
    tax_file = tmp_path / "train_taxonomy.npz"
    np.savez(tax_file, leaf_middle=shuffle.taxonomy.parents[0], middle_high=shuffle.taxonomy.parents[1])
    preset = tiny_preset(epochs=2, **{"controls.taxonomy_shuffle": True, "training.val_every": 2})
    spec = make_spec(tmp_path / "job", tiny_fs, tiny_dir, arms=("E_S",), preset=preset, train_taxonomy=str(tax_file))
    emitted = []
    trainer = FactorialTrainer(spec, emitted.append)
    # Training labels are the shuffled taxonomy's, validation ones the dataset's own.
    shuffled_labels = shuffle.taxonomy.labels(tiny_fs.leaf)
    assert (trainer.labels.numpy() == shuffled_labels).all()
    assert (trainer.true_labels.numpy() == tiny_fs.labels).all()
    assert not (shuffled_labels[:, 1] == tiny_fs.labels[:, 1]).all()
    trainer.run()
    [event] = [e for e in emitted if isinstance(e, Validation) and e.epoch == 2]
    # Recompute the epoch-2 validation score from the saved final model, once per taxonomy.
    model = build_projector(tiny_fs.dim, spec.cells[0], preset.training, preset.geometry.poincare)
    model.load_state_dict(checkpoints.load_payload(tmp_path / "job" / "job" / layout.final_model(spec.cells[0]))["model"])
    with np.load(spec.val_split) as z:
        q, g = torch.from_numpy(z["query"]), torch.from_numpy(z["gallery"])
    z_all = embed(model, torch.from_numpy(tiny_fs.features))

    def score(labels: np.ndarray) -> float:
        y = torch.from_numpy(labels)
        metrics = evaluate(z_all[q], z_all[g], y[q], y[g], model.geometry).aggregate(preset.evaluation.aggregation)
        return hier_score({level: m[MAP] for level, m in metrics.items()}, tiny_fs.taxonomy.levels.non_leaf)

    assert event.score == pytest.approx(score(tiny_fs.labels), abs=1e-6)
    assert event.score != pytest.approx(score(shuffled_labels), abs=1e-6)


def test_a_shuffle_control_study_records_and_audits_its_training_taxonomy(tmp_path, tiny_fs):
    preset = tiny_preset(
        **{
            "controls.taxonomy_shuffle": True,
            "training.cells": ["E_S"],
            "split.protocol": "hierarchy_disjoint",
            "split.level": "middle",
            "split.counts": [4, 1, 1],
            "evaluation.n_query": 8,
        }
    )
    with Store(tmp_path / "home") as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")
        Orchestrator(store, max_parallel=2).run_until_idle()
        edges = store.rows(
            "SELECT dev_nodes, fixed, fixed_min FROM taxonomy_shuffle_edges WHERE study_id = ? ORDER BY position", [study_id]
        )
        assert edges[1][0] == 5 and [fixed for _, fixed, _ in edges] == [fixed_min for *_, fixed_min in edges]
        checks = {c.name: c for c in stored_audits(store, study_id)}
        assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
        assert "1 middles unmoved" in checks["taxonomy_shuffle_development_only"].evidence
        lock = store.one("SELECT lock_sha256 FROM studies WHERE study_id = ?", [study_id])
        assert lock is not None and lock[0]


def test_a_five_level_shuffle_records_every_edge_and_its_file_has_one_array_per_edge(tmp_path):
    """The shuffle control at any depth: one `taxonomy_shuffle_edges` row per edge, fine to coarse, with the
    shuffle's own parents, development counts and fixed points; the file's arrays are keyed by edge."""
    from tests.study.db.test_levels_store import deep_taxonomy  # the five-level tree of the store tests

    tax = deep_taxonomy()
    n = 16
    fs = FeatureSet("deep5", np.zeros((n, 2), np.float32), np.array([f"i{i}" for i in range(n)]), np.arange(n) % 8,
                    np.arange(n) % 3, tax, "generic")  # fmt: skip
    dev = np.array([0, 1, 2, 3, 4, 5])
    preset = tiny_preset(**{"controls.taxonomy_shuffle": True})
    with Store(tmp_path / "home") as store:
        (store.home / "studies" / "s5" / "splits").mkdir(parents=True)
        record = _taxonomy_shuffle(store, "s5", preset, fs, dev)
    assert record is not None
    expected = development_shuffle(tax, dev, preset.controls.shuffle_seed)
    assert record["row"][:3] == ["s5", expected.seed, expected.sha256]
    assert [e[:3] for e in record["edges"]] == [
        ["s5", 1, "species_genus"], ["s5", 2, "genus_family"], ["s5", 3, "family_order"], ["s5", 4, "order_class"]
    ]  # fmt: skip
    for k, (_, _, edge, parents, dev_nodes, fixed, fixed_min) in enumerate(record["edges"]):
        assert json.loads(parents) == expected.taxonomy.parents[k].tolist()
        assert (dev_nodes, fixed, fixed_min) == (len(expected.dev_nodes[k]), expected.fixed[k], expected.fixed_min[k])
        with np.load(tmp_path / "home" / record["row"][3]) as z:
            assert list(z.keys()) == list(tax.levels.edges) and z[edge].tolist() == expected.taxonomy.parents[k].tolist()


def test_a_format_1_record_of_a_shuffle_study_restores_the_same_rows(tmp_path, tiny_fs):
    """`doctor --repair` rebuilds a store from study records; a record written before levels were general
    (format 1: the shuffle as one three-level row) restores the same shuffle rows as today's (format 2)."""
    preset = tiny_preset(**{"controls.taxonomy_shuffle": True, "training.cells": ["E_S"], "evaluation.n_query": 8})
    with Store(tmp_path / "home") as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, preset, "tiny")
        record = recorded_study(store.home, study_id)
        assert record is not None and record["format"] == RECORD_FORMAT == 2
        query = "SELECT * EXCLUDE (study_id) FROM {} WHERE study_id = ? ORDER BY ALL"
        wanted = {t: store.rows(query.format(t), [study_id]) for t in ("taxonomy_shuffles", "taxonomy_shuffle_edges")}
    # The same record as format 1 wrote it: the twelve columns of the three-level row.
    (sid, seed, sha256, path), (e1, e2) = record["taxonomy_shuffle"]["row"], record["taxonomy_shuffle"]["edges"]
    old = json.loads(json.dumps(record, default=str))
    old["format"] = 1
    old["taxonomy_shuffle"] = [sid, seed, sha256, e1[3], e2[3], e1[4], e2[4], e1[5], e1[6], e2[5], e2[6], path]
    (tmp_path / "old.json").write_text(json.dumps(old))
    old = read_record(tmp_path / "old.json", RECORD_FORMAT, "study")
    with Store(tmp_path / "home") as store:
        # The study's folder without its rows: what a repair restores a record into.
        for table in ("splits", "taxonomy_shuffles", "taxonomy_shuffle_edges", "study_levels", "jobs", "studies"):
            store.execute(f"DELETE FROM {table} WHERE study_id = ?", [study_id])
        restore_study(store, old)
        got = {t: store.rows(query.format(t), [study_id]) for t in wanted}
    assert got == wanted
