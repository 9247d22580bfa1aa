import hashlib

import numpy as np
import pytest

from hierconsole.datasets import (
    CUB_SIZED_CONFIG,
    DEFAULT_QG_SEEDS,
    Split,
    hierarchy_disjoint_split,
    make_synthetic,
    official_split,
    qg_perturbation,
    qg_perturbations,
    strict_valid_counts,
    tuning_split,
)
from hierconsole.errors import ConfigError
from hierconsole.taxonomy import Taxonomy


@pytest.fixture(scope="module")
def demo():
    return make_synthetic()


def random_labels(seed=0, n=800, n_leaves=60, n_middles=25, n_highs=6):
    rng = np.random.default_rng(seed)
    tax = Taxonomy(
        leaves=tuple(f"l{i}" for i in range(n_leaves)),
        middles=tuple(f"m{i}" for i in range(n_middles)),
        highs=tuple(f"h{i}" for i in range(n_highs)),
        leaf_middle=np.concatenate([np.arange(n_middles), rng.integers(0, n_middles, n_leaves - n_middles)]),
        middle_high=np.concatenate([np.arange(n_highs), rng.integers(0, n_highs, n_middles - n_highs)]),
    )
    return tax.labels(rng.integers(0, n_leaves, n))


def assert_partition(split: Split, rows: np.ndarray):
    allidx = np.concatenate(list(split.parts.values()))
    assert len(allidx) == len(np.unique(allidx))
    assert np.array_equal(np.sort(allidx), np.sort(rows))
    for idx in split.parts.values():
        assert idx.dtype == np.int64 and np.all(np.diff(idx) > 0)


def test_official_split(demo):
    s = official_split(demo)
    assert s.kind == "official" and set(s.parts) == {"train", "test"}
    assert s.sizes() == {"train": 1200, "test": 1000}
    assert np.all(demo.split[s["test"]] == 2)
    assert_partition(s, np.arange(len(demo)))
    with_val = make_synthetic()
    with_val.split[:5] = 1
    assert official_split(with_val).sizes() == {"train": 1195, "val": 5, "test": 1000}


@pytest.mark.parametrize("seed", [0, 7])
def test_parent_disjoint_split_has_no_leaf_or_middle_overlap(seed):
    labels = random_labels(seed)
    s = hierarchy_disjoint_split(labels, level="middle", counts=(15, 5, 5), seed=seed)
    assert s.kind == "hierarchy_disjoint"
    assert_partition(s, np.arange(len(labels)))
    names = ["train", "val", "test"]
    for col in (0, 1):
        sets = {n: set(labels[s[n], col].tolist()) for n in names}
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                assert not sets[a] & sets[b], (col, a, b)
    assert [len(np.unique(labels[s[n], 1])) for n in names] == [15, 5, 5]
    assert s.params["counts"] == [15, 5, 5] and s.params["middle_groups"] == {
        "train": 15,
        "val": 5,
        "test": 5,
    }


def test_high_disjoint_and_fractions():
    labels = random_labels(3)
    s = hierarchy_disjoint_split(labels, level="high", fractions=(0.5, 0.25, 0.25), seed=1)
    assert s.params["counts"] == [3, 2, 1]  # 3, 1.5, 1.5 by largest remainder, ties to the earlier part
    for col in (0, 1, 2):
        parts = [set(labels[s[n], col].tolist()) for n in ("train", "val", "test")]
        assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    default = hierarchy_disjoint_split(labels, seed=1)
    assert default.params["counts"] == [15, 5, 5]  # 0.6 / 0.2 / 0.2 of 25 middles


def test_disjoint_split_within_rows_and_determinism():
    labels = random_labels(4)
    within = np.arange(0, 800, 2)
    s = hierarchy_disjoint_split(labels, counts=None, seed=11, within=within)
    assert_partition(s, within)
    again = hierarchy_disjoint_split(labels, seed=11, within=within)
    assert again.sha256() == s.sha256()
    assert hierarchy_disjoint_split(labels, seed=12, within=within).sha256() != s.sha256()


def test_disjoint_split_rejects_bad_config():
    labels = random_labels()
    with pytest.raises(ConfigError, match="adding up to the 25 middle groups"):
        hierarchy_disjoint_split(labels, counts=(10, 5, 5), seed=0)
    with pytest.raises(ConfigError, match="not both"):
        hierarchy_disjoint_split(labels, counts=(15, 5, 5), fractions=(0.6, 0.2, 0.2), seed=0)
    with pytest.raises(ConfigError, match="level must be"):
        hierarchy_disjoint_split(labels, level="genus", seed=0)


def test_qg_perturbation_cub_sized():
    fs = make_synthetic(CUB_SIZED_CONFIG)
    test = np.flatnonzero(fs.split == 2)
    splits = qg_perturbations(fs.labels, test, n_query=870)
    assert [s.params["seed"] for s in splits] == list(DEFAULT_QG_SEEDS) == [42, 2024, 3407]
    for s in splits:
        assert s.kind == "qg" and s.sizes() == {"query": 870, "gallery": 4924}
        assert_partition(s, test)
        assert s.params["strict_valid"] == strict_valid_counts(fs.labels, s["query"], s["gallery"])
    assert len({s.sha256() for s in splits}) == 3
    again = qg_perturbation(fs.labels, test, n_query=870, seed=2024)
    assert again.sha256() == splits[1].sha256()
    assert np.array_equal(again["query"], splits[1]["query"])
    # the order test indices come in does not matter
    shuffled = np.random.default_rng(0).permutation(test)
    assert qg_perturbation(fs.labels, shuffled, n_query=870, seed=42).sha256() == splits[0].sha256()


def test_qg_rejects_bad_counts(demo):
    test = np.flatnonzero(demo.split == 2)
    for n in (0, len(test)):
        with pytest.raises(ConfigError, match="n_query"):
            qg_perturbation(demo.labels, test, n_query=n, seed=42)


def test_tuning_split_with_given_val():
    labels = random_labels(5)
    s = hierarchy_disjoint_split(labels, seed=0)
    t = tuning_split(labels, s["train"], s["val"], query_fraction=0.2, seed=3)
    assert t.kind == "tuning" and t.params["mode"] == "given_val"
    assert np.array_equal(t["fit"], s["train"])
    assert np.array_equal(np.sort(np.concatenate([t["query"], t["gallery"]])), s["val"])
    assert len(t["query"]) == round(0.2 * len(s["val"]))
    assert t.sha256() == tuning_split(labels, s["train"], s["val"], query_fraction=0.2, seed=3).sha256()


def test_tuning_split_holdout_is_stratified(demo):
    labels = demo.labels
    train = np.flatnonzero(demo.split == 0)
    t = tuning_split(labels, train, holdout_fraction=0.25, query_fraction=0.2, seed=0)
    assert t.params["mode"] == "holdout"
    assert_partition(t, train)
    pool = np.concatenate([t["query"], t["gallery"]])
    for leaf in np.unique(labels[train, 0]):
        n = (labels[train, 0] == leaf).sum()
        held = (labels[pool, 0] == leaf).sum()
        assert held == min(round(n * 0.25), n - 1)
        assert (labels[t["fit"], 0] == leaf).sum() >= 1
    assert (
        t.sha256() == tuning_split(labels, train, holdout_fraction=0.25, query_fraction=0.2, seed=0).sha256()
    )
    assert (
        t.sha256() != tuning_split(labels, train, holdout_fraction=0.25, query_fraction=0.2, seed=1).sha256()
    )


def brute_valid(labels, query, gallery):
    counts = {"leaf": 0, "middle": 0, "high": 0}
    for q in query:
        others = [g for g in gallery if g != q]
        if any(labels[g, 0] == labels[q, 0] for g in others):
            counts["leaf"] += 1
        if any(labels[g, 1] == labels[q, 1] and labels[g, 0] != labels[q, 0] for g in others):
            counts["middle"] += 1
        if any(labels[g, 2] == labels[q, 2] and labels[g, 1] != labels[q, 1] for g in others):
            counts["high"] += 1
    return counts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_strict_valid_counts_match_loops(seed):
    labels = random_labels(seed, n=150, n_leaves=40, n_middles=20, n_highs=5)
    rng = np.random.default_rng(seed)
    query = rng.choice(150, 40, replace=False)
    gallery = np.setdiff1d(np.arange(150), query)
    assert strict_valid_counts(labels, query, gallery) == brute_valid(labels, query, gallery)
    # a query that also sits in the gallery is never its own positive
    gallery_all = np.arange(150)
    assert strict_valid_counts(labels, query, gallery_all) == brute_valid(labels, query, gallery_all)


def test_split_sha256_recipe_and_checks():
    s = Split("qg", {"query": np.array([5, 1]), "gallery": np.array([0, 2, 9])}, {})
    h = hashlib.sha256(b"qg")
    for name, idx in (("gallery", [0, 2, 9]), ("query", [1, 5])):
        h.update(b"\x00" + name.encode() + b"\x00")
        h.update(np.int64(len(idx)).tobytes())
        h.update(np.array(idx, dtype="<i8").tobytes())
    assert s.sha256() == h.hexdigest()
    assert s["query"].tolist() == [1, 5]
    swapped = Split("qg", {"gallery": np.array([9, 2, 0]), "query": np.array([1, 5])}, {"other": 1})
    assert swapped.sha256() == s.sha256()
    assert (
        Split("tuning", {"query": np.array([1, 5]), "gallery": np.array([0, 2, 9])}, {}).sha256()
        != s.sha256()
    )
    with pytest.raises(ValueError, match="overlap"):
        Split("qg", {"query": np.array([1, 2]), "gallery": np.array([2, 3])}, {})
    with pytest.raises(ValueError, match="repeats"):
        Split("qg", {"query": np.array([1, 1]), "gallery": np.array([2, 3])}, {})
