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
    tax = Taxonomy.three(
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


# --- NABirds Parent-disjoint as the paper ran it (S1, Sec. 4) --------------------------------------------


def nabirds_sized_labels(seed=0):
    """Labels of NABirds' real sizes: 555 leaves, 404 Parents, 22 Supergroups, 23,929 official-train and
    24,633 official-test images (uneven per leaf), with their official split codes (0 train, 2 test)."""
    rng = np.random.default_rng(seed)
    leaf_parent = np.concatenate([np.arange(404), rng.integers(0, 404, 555 - 404)])
    parent_high = np.concatenate([np.arange(22), rng.integers(0, 22, 404 - 22)])

    def per_leaf(total):
        w = rng.gamma(4.0, size=555)
        c = np.maximum(1, np.floor(w / w.sum() * total)).astype(np.int64)
        while c.sum() < total:
            c[rng.integers(555)] += 1
        while c.sum() > total:
            c[np.argmax(c)] -= 1
        return c

    train, test = per_leaf(23_929), per_leaf(24_633)
    leaf = np.concatenate([np.repeat(np.arange(555), train), np.repeat(np.arange(555), test)])
    code = np.concatenate([np.zeros(train.sum(), np.int8), np.full(test.sum(), 2, np.int8)])
    return np.stack([leaf, leaf_parent[leaf], parent_high[leaf_parent[leaf]]], axis=1), code


NABIRDS_TARGETS = dict(counts=(242, 81, 81), leaf_counts=(328, 114, 113), image_counts=(13_959, 5_062, 5_017))


@pytest.mark.parametrize("seed", [42, 1])
def test_nabirds_parent_disjoint_meets_the_papers_counts(seed):
    labels, code = nabirds_sized_labels()
    assert len(labels) == 48_562
    s = hierarchy_disjoint_split(labels, level="middle", seed=seed, official=code, **NABIRDS_TARGETS)
    assert s.sizes() == {"train": 13_959, "val": 5_062, "test": 5_017}
    for level, want in (("leaf", (328, 114, 113)), ("middle", (242, 81, 81))):
        realised = [len(np.unique(labels[s[p], LEVEL_COL[level]])) for p in ("train", "val", "test")]
        assert realised == list(want)
        assert s.params[f"{level}_groups"] == dict(zip(("train", "val", "test"), want, strict=True))
    # Development from official-train images only, test from official-test images only.
    assert np.all(code[s["train"]] == 0) and np.all(code[s["val"]] == 0) and np.all(code[s["test"]] == 2)
    # Every official-train image of a development leaf is used, and every official-test one of a test leaf.
    dev_leaves = np.unique(labels[np.concatenate([s["train"], s["val"]]), 0])
    assert np.isin(labels[:, 0], dev_leaves)[code == 0].sum() == 19_021
    assert np.isin(labels[:, 0], np.unique(labels[s["test"], 0]))[code == 2].sum() == 5_017
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        for col in (0, 1):
            assert not np.intersect1d(labels[s[a], col], labels[s[b], col]).size
    again = hierarchy_disjoint_split(labels, level="middle", seed=seed, official=code, **NABIRDS_TARGETS)
    assert again.sha256() == s.sha256()


LEVEL_COL = {"leaf": 0, "middle": 1, "high": 2}


def test_nabirds_tuning_split_sizes():
    labels, code = nabirds_sized_labels()
    s = hierarchy_disjoint_split(labels, level="middle", seed=42, official=code, **NABIRDS_TARGETS)
    t = tuning_split(labels, s["train"], s["val"], n_query=1_013, seed=42)
    assert t.sizes() == {"fit": 13_959, "query": 1_013, "gallery": 4_049}
    # 0.2 of 5,062 rounds to 1,012: the paper's 1,013 needs the exact count.
    assert tuning_split(labels, s["train"], s["val"], seed=42).sizes()["query"] == 1_012


def test_pooled_images_and_unreachable_targets():
    labels, code = nabirds_sized_labels()
    pooled = hierarchy_disjoint_split(labels, level="middle", counts=(242, 81, 81), seed=42)
    assert sum(pooled.sizes().values()) == 48_562  # the old reading: every image of the groups
    with pytest.raises(ConfigError, match="no assignment of the 404 middle groups.*closest: leaves"):
        hierarchy_disjoint_split(
            labels, level="middle", counts=(242, 81, 81), leaf_counts=(500, 30, 25), seed=42, official=code
        )


# -- any depth ------------------------------------------------------------------------------------------


def deep_labels(k: int, seed: int = 0, n: int = 400, n_leaves: int = 60):
    from tests.deep_trees import deep_taxonomy

    tax = deep_taxonomy(k, n_leaves, seed, names=[f"Rank {i}" for i in range(1, k + 1)])
    return tax, tax.labels(np.random.default_rng(seed).integers(0, n_leaves, n))


def brute_valid_k(labels, query, gallery, codes):
    """Plain loop: a query is valid at level k when some other gallery item shares its level-k group
    and (above the leaf) not its level-(k-1) group."""
    counts = dict.fromkeys(codes, 0)
    for q in query:
        others = [g for g in gallery if g != q]
        for k, code in enumerate(codes):
            if any(
                labels[g, k] == labels[q, k] and (k == 0 or labels[g, k - 1] != labels[q, k - 1])
                for g in others
            ):
                counts[code] += 1
    return counts


@pytest.mark.parametrize("k, seed", [(5, 0), (5, 1), (7, 2), (7, 3), (2, 4), (12, 5)])
def test_strict_valid_counts_of_k_levels_match_a_loop(k, seed):
    tax, labels = deep_labels(k, seed, n=150, n_leaves=40)
    rng = np.random.default_rng(seed)
    query = rng.choice(150, 40, replace=False)
    gallery = np.setdiff1d(np.arange(150), query)
    levels = tax.levels
    expected = brute_valid_k(labels, query, gallery, levels.codes)
    assert strict_valid_counts(labels, query, gallery, levels) == expected
    assert list(expected) == [f"rank{i}" for i in range(1, k + 1)]
    everything = np.arange(150)
    assert strict_valid_counts(labels, query, everything, levels) == brute_valid_k(
        labels, query, everything, levels.codes
    )


@pytest.mark.parametrize(
    "ref, col", [("rank2", 1), ("Rank 2", 1), (2, 1), ("middle", 1), ("5", 4), ("rank5", 4)]
)
def test_disjoint_at_any_level_of_seven(ref, col):
    tax, labels = deep_labels(7, 3)
    split = hierarchy_disjoint_split(labels, level=ref, levels=tax.levels, seed=11)
    assert_partition(split, np.arange(len(labels)))
    assert split.params["level"] == tax.levels.codes[col]
    # No group at that level, nor at any finer one, is in two parts.
    for j in range(col + 1):
        seen = [set(labels[idx, j].tolist()) for idx in split.parts.values()]
        assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    assert list(split.params)[-7:] == [f"rank{i}_groups" for i in range(1, 8)]
    for i in range(7):
        assert split.params[f"rank{i + 1}_groups"] == {
            name: len(set(labels[idx, i].tolist())) for name, idx in split.parts.items()
        }


def test_three_level_disjoint_draw_is_unchanged_by_level_references():
    labels = random_labels(3)
    base = hierarchy_disjoint_split(labels, level="middle", seed=7)
    from hierconsole.levels import Levels

    for ref in (2, "Genus"):
        again = hierarchy_disjoint_split(
            labels, level=ref, levels=Levels.of(("Class", "Genus", "Family")), seed=7
        )
        assert again.sha256() == base.sha256() and again.params == base.params
    assert base.params["level"] == "middle" and "middle_groups" in base.params


def test_a_level_reference_outside_the_tree_is_refused():
    tax, labels = deep_labels(5)
    with pytest.raises(ConfigError, match="level must be one of 1 rank1"):
        hierarchy_disjoint_split(labels, level="genus", levels=tax.levels, seed=0)
    with pytest.raises(ConfigError, match="level must be one of"):
        hierarchy_disjoint_split(labels, level=6, levels=tax.levels, seed=0)


def test_empty_levels_of_k_levels():
    from hierconsole.datasets.splits import empty_levels
    from hierconsole.levels import Levels

    levels = Levels.of(("A", "B", "C", "D", "E", "F"))
    counts = [
        {"a": 3, "b": 2, "c": 1, "d": 0, "e": 4, "f": 1},
        {"a": 3, "b": 0, "c": 1, "d": 2, "e": 4, "f": 1},
    ]
    assert empty_levels(counts, levels) == ("b", "d")
    assert empty_levels(counts) == ("b", "d")
    assert empty_levels([{"leaf": 1, "middle": 0}]) == (
        "middle",
        "high",
    )  # three levels: a missing one is empty
