import dataclasses

import numpy as np
import pytest

from hierconsole.datasets import CUB_SIZED_CONFIG, DEMO_CONFIG, SyntheticConfig, make_synthetic
from hierconsole.errors import ConfigError
from hierconsole.taxonomy import relation_codes

# Pair relations of three levels: the lowest level at which two samples meet, 3 where they meet at none.
REL_C, REL_M, REL_H, REL_O = 0, 1, 2, 3


def test_demo_shape():
    fs = make_synthetic()
    assert fs.name == "demo" and fs.kind == "synthetic" and fs.sources == {}
    assert fs.features.shape == (2200, 768) and fs.features.dtype == np.float32
    assert fs.split_counts() == {"train": 1200, "val": 0, "test": 1000}
    s = fs.taxonomy.summary()
    assert s.counts == {"leaf": 40, "middle": 16, "high": 5}
    assert s.singletons[0] == 6
    # every leaf appears in both parts, so leaf retrieval on the test split has positives
    for code in (0, 2):
        assert len(np.unique(fs.leaf[fs.split == code])) == 40
    assert fs.params["seed"] == 0 and fs.params["n_train"] == 1200


def test_bit_deterministic_and_seeded():
    a, b = make_synthetic(DEMO_CONFIG), make_synthetic(DEMO_CONFIG)
    assert a.features.tobytes() == b.features.tobytes()
    assert a.sha256() == b.sha256()
    c = make_synthetic(dataclasses.replace(DEMO_CONFIG, seed=1))
    assert c.sha256() != a.sha256()
    assert c.taxonomy.sha256() != a.taxonomy.sha256()


def test_cub_sized_is_shaped():
    # How long it takes is measured in benchmarks/synthetic.py, never asserted here.
    fs = make_synthetic(CUB_SIZED_CONFIG)
    assert fs.split_counts() == {"train": 5994, "val": 0, "test": 5794}
    s = fs.taxonomy.summary()
    assert s.counts == {"leaf": 200, "middle": 124, "high": 37}
    assert s.singletons[0] == 87
    assert "87 of 124 genera hold one class" in s.lines()


def test_features_carry_the_hierarchy():
    fs = make_synthetic()
    rng = np.random.default_rng(0)
    idx = rng.choice(len(fs), 600, replace=False)
    x, lab = fs.features[idx].astype(np.float64), fs.labels[idx]
    sq = (x**2).sum(1)
    d = np.sqrt(np.maximum(sq[:, None] + sq[None] - 2 * x @ x.T, 0))
    rel = relation_codes(lab, lab)
    off = ~np.eye(len(idx), dtype=bool)
    means = [d[(rel == r) & off].mean() for r in (REL_C, REL_M, REL_H, REL_O)]
    assert means[0] < means[1] < means[2] < means[3]


def test_leaf_is_easier_than_strict_middle_on_raw_features():
    """Nearest train-centroid accuracy: leaves are fairly easy; a middle from other leaves is harder."""
    fs = make_synthetic()
    lab = fs.labels
    train, test = fs.split == 0, fs.split == 2
    x = fs.features / np.linalg.norm(fs.features, axis=1, keepdims=True)
    cent = np.stack([x[train & (fs.leaf == k)].mean(0) for k in range(40)])
    leaf_acc = (np.argmax(x[test] @ cent.T, 1) == fs.leaf[test]).mean()
    assert leaf_acc > 0.6
    # strict middle: among centroids of the *other* leaves, is the nearest one a sibling?
    scores = x[test] @ cent.T
    scores[np.arange(test.sum()), fs.leaf[test]] = -np.inf
    has_sibling = np.array([(fs.taxonomy.parents[0] == m).sum() > 1 for m in lab[test, 1]])
    nearest = np.argmax(scores, 1)
    sibling_acc = (fs.taxonomy.parents[0][nearest] == lab[test, 1])[has_sibling].mean()
    assert 0.1 < sibling_acc < leaf_acc


@pytest.mark.parametrize(
    "over",
    [
        {"n_middles": 50},
        {"n_singleton_middles": 17},
        {"n_train": 10},
        {"n_highs": 0},
    ],
)
def test_config_checked(over):
    with pytest.raises(ConfigError):
        SyntheticConfig(**over)


# -- deep trees -----------------------------------------------------------------------------------------


def _valid_queries_per_level(fs) -> list[int]:
    """Plain loop: test queries with at least one strict positive at each level above the leaf."""
    labels = fs.labels[fs.split == 2]
    out = []
    for k in range(1, labels.shape[1]):
        n = 0
        for q in range(len(labels)):
            same_k = labels[:, k] == labels[q, k]
            finer = labels[:, k - 1] == labels[q, k - 1]
            n += bool((same_k & ~finer).any())
        out.append(n)
    return out


@pytest.mark.parametrize("which", ["tree2", "tree5", "tree7", "tree12"])
def test_the_built_in_deep_trees_have_valid_queries_at_every_level(which):
    from hierconsole.datasets.synthetic import BUILT_IN

    config = BUILT_IN[which]
    fs = make_synthetic(config)
    k = int(which.removeprefix("tree"))
    assert fs.name == which and fs.taxonomy.k == k and fs.labels.shape == (len(fs), k)
    assert fs.features.shape[1] == 64 and 1000 <= len(fs) <= 2000
    assert fs.taxonomy.counts == config.level_sizes
    assert fs.taxonomy.level_names == config.level_names
    assert all(n > 0 for n in _valid_queries_per_level(fs))
    assert make_synthetic(config).sha256() == fs.sha256()  # bit-deterministic


def test_tree7_is_named_by_the_ranks():
    from hierconsole.datasets.synthetic import BUILT_IN

    fs = make_synthetic(BUILT_IN["tree7"])
    assert fs.taxonomy.level_names == ("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom")
    assert fs.taxonomy.levels.codes[-1] == "kingdom"


def test_deep_features_carry_every_level():
    # Mean within-group cosine similarity exceeds the between-group mean at every level: the structure
    # is in the features, coarse levels included.
    from hierconsole.datasets.synthetic import BUILT_IN

    fs = make_synthetic(BUILT_IN["tree5"])
    x = fs.features / np.linalg.norm(fs.features, axis=1, keepdims=True)
    sim = x @ x.T
    labels = fs.labels
    for k in range(labels.shape[1]):
        same = labels[:, k][:, None] == labels[:, k][None, :]
        assert sim[same].mean() > sim[~same].mean() + 0.02, k


@pytest.mark.parametrize(
    "over, message",
    [
        ({"level_sizes": (10, 10, 3)}, "shrink strictly"),
        ({"level_sizes": (10,), "level_names": ("A",)}, "1 levels"),
        ({"level_names": ("A", "B")}, "level names"),
        ({"n_test": 5}, "at least one sample"),
    ],
)
def test_deep_config_is_checked(over, message):
    from hierconsole.datasets.synthetic import DeepSyntheticConfig

    kw = {"name": "x", "level_sizes": (10, 5, 2), "level_names": ("A", "B", "C"), **over}
    with pytest.raises(ConfigError, match=message):
        DeepSyntheticConfig(**kw)


def test_the_demo_data_is_unchanged_by_the_deep_generator():
    # The demo's params (asdict of SyntheticConfig) and bytes are stored with every demo study.
    assert [f.name for f in dataclasses.fields(SyntheticConfig)][:6] == [
        "name",
        "seed",
        "n_leaves",
        "n_middles",
        "n_highs",
        "n_singleton_middles",
    ]
    assert make_synthetic(DEMO_CONFIG).sha256().startswith("ab2d90df18ec")
