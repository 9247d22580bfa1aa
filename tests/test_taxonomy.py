import itertools
from pathlib import Path

import numpy as np
import pytest

from hierconsole.errors import InputError
from hierconsole.taxonomy import (
    SHUFFLE_SEED,
    Taxonomy,
    development_shuffle,
    load_taxonomy_csv,
    min_fixed_points,
    relation_codes,
)
from hierconsole.vocabulary import CUB_LEVEL_NAMES

# Pair relations of three levels: the lowest level at which two samples meet, 3 where they meet at none.
REL_C, REL_M, REL_H, REL_O = 0, 1, 2, 3

ROWS = [
    ("sparrow", "Passer", "Passeridae"),
    ("tree sparrow", "Passer", "Passeridae"),
    ("albatross", "Phoebastria", "Diomedeidae"),
    ("laysan", "Phoebastria", "Diomedeidae"),
    ("petrel", "Pterodroma", "Procellariidae"),
]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_from_rows_indexes_by_first_appearance():
    tax = Taxonomy.from_rows(ROWS)
    assert tax.leaves == ("sparrow", "tree sparrow", "albatross", "laysan", "petrel")
    assert tax.nodes[1] == ("Passer", "Phoebastria", "Pterodroma")
    assert tax.nodes[2] == ("Passeridae", "Diomedeidae", "Procellariidae")
    assert tax.parents[0].tolist() == [0, 0, 1, 1, 2]
    assert tax.parents[1].tolist() == [0, 1, 2]
    assert tax.rows() == ROWS
    assert tax.leaf_index()["laysan"] == 3
    labels = tax.labels(np.array([4, 0, 3]))
    assert labels.dtype == np.int64
    assert labels.tolist() == [[4, 2, 2], [0, 0, 0], [3, 1, 1]]


def test_csv_reads_display_name_header_and_ignores_extra_columns(tmp_path):
    path = write(tmp_path / "t.csv", "note,Class,Genus,Family\nx,a,G1,F1\ny,b,G1,F1\n\nz,c,G2,F1\n")
    tax = load_taxonomy_csv(path, level_names=CUB_LEVEL_NAMES)
    assert tax.rows() == [("a", "G1", "F1"), ("b", "G1", "F1"), ("c", "G2", "F1")]
    assert tax.level_names == CUB_LEVEL_NAMES


def test_csv_lists_every_conflict_with_rows(tmp_path):
    path = write(
        tmp_path / "tax.csv",
        "leaf,middle,high\n"
        "a,G1,F1\n"  # line 2
        "b,G1,F2\n"  # line 3: G1 under a second high
        "a,G2,F1\n"  # line 4: leaf a under a second middle
        "c,,F1\n"  # line 5: empty middle
        "d,G3,F3\n"  # line 6
        "d,G3,F3\n"  # line 7: duplicate of 6
        "e,G3\n",  # line 8: short row
    )
    with pytest.raises(InputError) as err:
        load_taxonomy_csv(path)
    problems = err.value.problems
    text = str(err.value)
    assert str(path) in text
    assert any(
        "Leaf 'a' is under 2 Middle values" in p and "'G1' (row 2)" in p and "'G2' (row 4)" in p
        for p in problems
    )
    assert any(
        "Middle 'G1' is under 2 High values" in p and "'F1' (row 2)" in p and "'F2' (row 3)" in p
        for p in problems
    )
    assert any(p.startswith("row 5: empty Middle") for p in problems)
    assert any(p.startswith("row 7: duplicate of row 6") for p in problems)
    assert any(p.startswith("row 8: empty High") for p in problems)
    assert len(problems) == 5
    assert "fix:" in text


def test_csv_missing_column_and_empty_file(tmp_path):
    assert load_taxonomy_csv(write(tmp_path / "a.csv", "leaf,genus\nx,y\n")).level_names == ("leaf", "genus")
    with pytest.raises(InputError, match=r"line 1: missing columns middle, high"):
        load_taxonomy_csv(
            write(tmp_path / "a.csv", "leaf,genus\nx,y\n"), level_names=("Leaf", "Middle", "High")
        )
    with pytest.raises(InputError, match="empty"):
        load_taxonomy_csv(write(tmp_path / "b.csv", ""))
    with pytest.raises(InputError, match="no rows"):
        load_taxonomy_csv(write(tmp_path / "c.csv", "leaf,middle,high\n"))
    with pytest.raises(InputError, match="cannot read"):
        load_taxonomy_csv(tmp_path / "absent.csv")


def test_a_header_with_some_paper_codes_names_its_own_levels(tmp_path):
    # Only a header holding all of leaf, middle and high is the three-level layout; any other names its levels.
    two = load_taxonomy_csv(write(tmp_path / "two.csv", "leaf,group\na,g1\nb,g1\nc,g2\n"))
    assert two.level_names == ("leaf", "group")
    assert two.counts == (3, 2)
    four = load_taxonomy_csv(write(tmp_path / "four.csv", "leaf,middle,high,top\na,m1,h1,t1\nb,m2,h2,t1\n"))
    assert four.k == 4
    assert four.level_names == ("leaf", "middle", "high", "top")
    assert four.rows() == [("a", "m1", "h1", "t1"), ("b", "m2", "h2", "t1")]
    # The three-level layout reads its columns by name.
    three = load_taxonomy_csv(write(tmp_path / "three.csv", "high,leaf,middle\nh,a,m\n"))
    assert three.level_names == ("Leaf", "Middle", "High")
    assert three.rows() == [("a", "m", "h")]


def test_summary_counts_singletons_with_display_names():
    # 124 genera of which 87 hold one class, as in CUB: 87 singletons + 37 genera of 3 or 4 classes = 200.
    rows = []
    for g in range(124):
        size = 1 if g < 87 else (4 if g < 87 + 2 else 3)
        rows += [(f"c{g}_{k}", f"g{g}", f"f{g % 37}") for k in range(size)]
    tax = Taxonomy.from_rows(rows, level_names=CUB_LEVEL_NAMES)
    s = tax.summary()
    assert s.counts == {"leaf": 200, "middle": 124, "high": 37}
    assert s.singletons[0] == 87
    lines = s.lines()
    assert lines[0] == "200 classes, 124 genera, 37 families"
    assert "87 of 124 genera hold one class" in lines
    assert "0 of 37 families hold one genus" in lines
    assert not s.warnings


def test_summary_depth_sanity_warnings():
    # A middle named like a high, and every middle holding one leaf (the middle level collapses).
    tax = Taxonomy.from_rows([("a", "Perching", "Perching"), ("b", "Ducks", "Water")])
    warnings = tax.summary().warnings
    assert any("also used as high names: 'Perching'" in w for w in warnings)
    assert any("every middle holds one leaf" in w for w in warnings)
    assert any("every high holds one middle" in w for w in warnings)
    assert all(w.startswith("warning: ") for w in tax.summary().lines()[5:])


def test_relation_codes_match_loops():
    rng = np.random.default_rng(0)
    tax = Taxonomy.from_rows([(f"l{i}", f"m{i // 3}", f"h{i // 6}") for i in range(20)])
    a = tax.labels(rng.integers(0, 20, 30))
    b = tax.labels(rng.integers(0, 20, 25))
    codes = relation_codes(a, b)
    assert codes.dtype == np.int8 and codes.shape == (30, 25)
    for i, j in itertools.product(range(30), range(25)):
        if a[i, 0] == b[j, 0]:
            want = REL_C
        elif a[i, 1] == b[j, 1]:
            want = REL_M
        elif a[i, 2] == b[j, 2]:
            want = REL_H
        else:
            want = REL_O
        assert codes[i, j] == want
    assert set(np.unique(codes)) == {REL_C, REL_M, REL_H, REL_O}


def test_sha256_is_content_hash():
    a, b = Taxonomy.from_rows(ROWS), Taxonomy.from_rows(list(ROWS))
    assert a.sha256() == b.sha256()
    moved = [*ROWS[:4], ("petrel", "Phoebastria", "Diomedeidae"), ("p2", "Pterodroma", "Procellariidae")]
    assert Taxonomy.from_rows(moved).sha256() != a.sha256()
    assert Taxonomy.from_rows(ROWS, level_names=CUB_LEVEL_NAMES).sha256() != a.sha256()


def _random_taxonomy(rng, n_leaves, n_middles, n_highs):
    lm = np.concatenate([np.arange(n_middles), rng.integers(0, n_middles, n_leaves - n_middles)])
    mh = np.concatenate([np.arange(n_highs), rng.integers(0, n_highs, n_middles - n_highs)])
    # index by first appearance so that from_rows would give the same indices
    return Taxonomy.three(
        leaves=tuple(f"l{i}" for i in range(n_leaves)),
        middles=tuple(f"m{i}" for i in range(n_middles)),
        highs=tuple(f"h{i}" for i in range(n_highs)),
        leaf_middle=lm,
        middle_high=mh,
    )


def _whole_tree_shuffle(tax: Taxonomy, seed: int = SHUFFLE_SEED) -> Taxonomy:
    """The development shuffle with every leaf a development leaf: it moves the whole tree."""
    return development_shuffle(tax, range(len(tax.leaves)), seed=seed).taxonomy


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_shuffle_guarantees(seed):
    rng = np.random.default_rng(seed)
    tax = _random_taxonomy(rng, 60, 25, 6)
    shuf = _whole_tree_shuffle(tax, seed=seed)
    assert (shuf.leaves, shuf.nodes[1], shuf.nodes[2]) == (tax.leaves, tax.nodes[1], tax.nodes[2])
    assert sorted(np.bincount(shuf.parents[0]).tolist()) == sorted(np.bincount(tax.parents[0]).tolist())
    assert (np.bincount(shuf.parents[0]) == np.bincount(tax.parents[0])).all()
    assert (np.bincount(shuf.parents[1]) == np.bincount(tax.parents[1])).all()
    assert (shuf.parents[0] != tax.parents[0]).all()
    assert (shuf.parents[1] == tax.parents[1]).sum() == min_fixed_points(tax.parents[1])
    # Not a relabelling of whole groups: some middle's leaves land in different middles.
    assert any(len(set(shuf.parents[0][tax.parents[0] == m].tolist())) > 1 for m in range(25))


def test_shuffle_deterministic_and_seeded():
    tax = _random_taxonomy(np.random.default_rng(5), 40, 15, 4)
    a = _whole_tree_shuffle(tax)
    assert a.sha256() == _whole_tree_shuffle(tax).sha256()
    assert a.sha256() == _whole_tree_shuffle(tax, seed=20260818).sha256()
    assert a.sha256() != _whole_tree_shuffle(tax, seed=1).sha256()
    assert a.sha256() != tax.sha256()


@pytest.mark.parametrize(
    ("leaf_middle", "middle_high"),
    [
        ([0, 0, 0, 0, 0, 1, 2, 3], [0, 0, 0, 1]),  # dominant middle and dominant high: fixed points forced
        ([0, 0, 1, 1, 2, 3, 3, 4], [0, 1, 1, 2, 2]),  # balanced: a full derangement exists
    ],
)
def test_shuffle_fixed_points_are_the_brute_force_minimum(leaf_middle, middle_high):
    tax = Taxonomy.three(
        leaves=tuple(f"l{i}" for i in range(len(leaf_middle))),
        middles=tuple(f"m{i}" for i in range(len(middle_high))),
        highs=tuple(f"h{i}" for i in range(max(middle_high) + 1)),
        leaf_middle=leaf_middle,
        middle_high=middle_high,
    )
    for groups, edge in ((leaf_middle, 0), (middle_high, 1)):
        best = min(
            sum(a == b for a, b in zip(p, groups, strict=True)) for p in itertools.permutations(groups)
        )
        assert min_fixed_points(np.array(groups)) == best
        for seed in range(5):
            got = _whole_tree_shuffle(tax, seed=seed).parents[edge].tolist()
            assert sorted(got) == sorted(groups)
            assert sum(a == b for a, b in zip(got, groups, strict=True)) == best


def test_direct_construction_is_checked():
    with pytest.raises(InputError, match="every middle needs a leaf"):
        Taxonomy.three(leaves=("a",), middles=("m", "n"), highs=("h",), leaf_middle=[0], middle_high=[0, 0])
    with pytest.raises(InputError, match="outside the middles"):
        Taxonomy.three(leaves=("a",), middles=("m",), highs=("h",), leaf_middle=[3], middle_high=[0])


# -- any depth --------------------------------------------------------------------------------------------


def _deep_rows(rng, k, n_leaves):
    """Rows of a random K-level tree: each level's nodes get parents among fewer nodes above."""
    sizes = [n_leaves]
    for _ in range(k - 1):
        sizes.append(max(1, sizes[-1] // 2))
    parents = [
        np.concatenate([np.arange(sizes[j + 1]), rng.integers(0, sizes[j + 1], sizes[j] - sizes[j + 1])])
        for j in range(k - 1)
    ]
    rows = []
    for leaf in range(n_leaves):
        row, i = [f"n0_{leaf}"], leaf
        for j in range(k - 1):
            i = int(parents[j][i])
            row.append(f"n{j + 1}_{i}")
        rows.append(tuple(row))
    return rows


@pytest.mark.parametrize("k", [2, 5, 12])
def test_k_levels_build_labels_rows_and_relations(k):
    rng = np.random.default_rng(k)
    rows = _deep_rows(rng, k, 40)
    names = tuple(f"Rank{j}" for j in range(k))
    tax = Taxonomy.from_rows(rows, level_names=names)
    assert tax.k == k and tax.levels.names == names
    assert tax.rows() == rows
    labels = tax.labels(np.arange(tax.n_leaves))
    assert labels.shape == (40, k)
    for leaf, row in enumerate(rows):
        assert [tax.nodes[j][labels[leaf, j]] for j in range(k)] == list(row)
    # Relations against a plain loop: the lowest level at which two samples meet, K for none.
    a, b = labels[rng.integers(0, 40, 30)], labels[rng.integers(0, 40, 25)]
    codes = relation_codes(a, b)
    for i in range(len(a)):
        for j in range(len(b)):
            meet = next((lvl for lvl in range(k) if a[i, lvl] == b[j, lvl]), k)
            assert codes[i, j] == meet
    assert Taxonomy.from_rows(rows, level_names=names).sha256() == tax.sha256()


def test_k_level_conflicts_name_both_parents_at_every_edge():
    rows = [
        ("a", "g1", "f1", "o1", "k1"),
        ("b", "g1", "f2", "o1", "k1"),
        ("c", "g2", "f3", "o2", "k1"),
        ("d", "g3", "f3", "o3", "k1"),
        ("a", "g4", "f4", "o4", "k2"),
    ]
    with pytest.raises(InputError) as err:
        Taxonomy.from_rows(rows, level_names=("Species", "Genus", "Family", "Order", "Kingdom"))
    problems = err.value.problems
    assert any(
        "Species 'a' is under 2 Genus values" in p and "(row 1)" in p and "(row 5)" in p for p in problems
    )
    assert any("Genus 'g1' is under 2 Family values: 'f1' (row 1); 'f2' (row 2)" in p for p in problems)
    assert any("Family 'f3' is under 2 Order values" in p for p in problems)
    assert any("Order 'o4'" in p for p in problems) is False
    assert "each Species needs exactly one Genus, each Genus exactly one Family" in str(err.value)


def test_a_header_of_level_names_gives_the_depth(tmp_path):
    rows = _deep_rows(np.random.default_rng(0), 4, 12)
    text = "species,genus,family,order\n" + "".join(",".join(r) + "\n" for r in rows)
    tax = load_taxonomy_csv(write(tmp_path / "t.csv", text))
    assert tax.level_names == ("species", "genus", "family", "order")
    assert tax.levels.codes == ("species", "genus", "family", "order")
    assert tax.rows() == rows
    with pytest.raises(InputError, match="names 13 levels"):
        load_taxonomy_csv(write(tmp_path / "w.csv", ",".join(f"c{i}" for i in range(13)) + "\n"))


def test_k_level_summary_lines():
    rows = [
        ("a", "g1", "f1", "o1"),
        ("b", "g1", "f1", "o1"),
        ("c", "g2", "f1", "o1"),
        ("d", "g3", "f2", "o1"),
    ]
    lines = Taxonomy.from_rows(rows, level_names=("Species", "Genus", "Family", "Order")).summary().lines()
    assert lines[:7] == [
        "4 species, 3 genera, 2 families, 1 order",
        "2 of 3 genera hold one species",
        "1 of 2 families hold one genus",
        "0 of 1 order hold one family",
        "species per genus: min 1, median 1, max 2",
        "genera per family: min 1, median 1.5, max 2",
        "families per order: min 2, median 2, max 2",
    ]
    assert lines[7:] == ["warning: a single order: the Order level carries no information"]


def test_k_level_shuffle_derange_every_edge_and_three_levels_keep_their_draws():
    rows = _deep_rows(np.random.default_rng(3), 5, 60)
    tax = Taxonomy.from_rows(rows)
    shuf = development_shuffle(tax, range(0, 60, 2))
    assert len(shuf.fixed) == 4
    for k in range(4):
        true, new = tax.parents[k], shuf.taxonomy.parents[k]
        dev = shuf.dev_nodes[k]
        assert sorted(new[dev].tolist()) == sorted(true[dev].tolist())
        assert shuf.fixed[k] == shuf.fixed_min[k] == min_fixed_points(true[dev])
        others = np.setdiff1d(np.arange(len(true)), dev)
        assert (new[others] == true[others]).all()
    # Three levels: the edges draw from one generator in the order of the paper's control.
    three = _random_taxonomy(np.random.default_rng(7), 30, 12, 4)
    got = development_shuffle(three, range(30), seed=11).taxonomy
    rng = np.random.default_rng(11)
    from hierconsole.taxonomy import _deranged_permutation

    lm = _deranged_permutation(three.parents[0], rng)
    mh = _deranged_permutation(three.parents[1], rng)
    assert (got.parents[0] == lm).all() and (got.parents[1] == mh).all()


def test_level_names_repeating_ignoring_case_are_refused():
    with pytest.raises(InputError, match="level names repeat ignoring case: Genus, genus"):
        Taxonomy((("a", "b"), ("g",)), (np.array([0, 0]),), ("Genus", "genus"))
    with pytest.raises(InputError, match="level names repeat ignoring case: Genus, genus"):
        Taxonomy.from_rows([("a", "g")], level_names=("Genus", "genus"), source="t.csv")
