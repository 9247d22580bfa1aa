from pathlib import Path

import numpy as np
import pytest

from hierconsole.datasets import import_generic
from hierconsole.errors import InputError

TAX = (
    "leaf,middle,high\nsparrow,Passer,Passeridae\ntree,Passer,Passeridae\nalbatross,Phoebastria,Diomedeidae\n"
)


def files(tmp_path: Path, labels: str, *, ids=("s1", "s2", "s3", "s4"), x=None):
    x = np.arange(4 * 5, dtype=np.float32).reshape(4, 5) if x is None else x
    (tmp_path / "tax.csv").write_text(TAX)
    (tmp_path / "labels.csv").write_text(labels)
    feats = tmp_path / "f.npz"
    if ids is None:
        np.savez(feats, features=x)
    else:
        np.savez(feats, features=x, ids=np.array(ids))
    return feats, tmp_path / "labels.csv", tmp_path / "tax.csv", x


def bad(tmp_path, labels, **kw) -> InputError:
    args = files(tmp_path, labels, **kw)[:3]
    with pytest.raises(InputError) as err:
        import_generic(*args, name="g")
    return err.value


def test_import_with_ids_and_split(tmp_path):
    labels = "id,leaf,split\ns3,albatross,TEST\ns1,sparrow,train\ns2,tree,val\ns4,tree,validation\n"
    feats, lab, tax, x = files(tmp_path, labels)
    before = sorted(p.name for p in tmp_path.iterdir())
    fs = import_generic(feats, lab, tax, name="g", expected_dim=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert fs.ids.tolist() == ["s3", "s1", "s2", "s4"]  # label CSV order
    np.testing.assert_array_equal(fs.features, x[[2, 0, 1, 3]])
    assert fs.leaf.tolist() == [2, 0, 1, 1]
    assert fs.split.tolist() == [2, 0, 1, 1]
    assert fs.labels.tolist() == [[2, 1, 1], [0, 0, 0], [1, 0, 0], [1, 0, 0]]
    assert fs.kind == "generic" and fs.params == {"features_keyed_by": "id", "split_column": True}
    assert set(fs.sources) == {str(p.resolve()) for p in (feats, lab, tax)}


def test_without_split_or_feature_ids(tmp_path):
    feats, lab, tax, x = files(tmp_path, "id,leaf\na,sparrow\nb,tree\nc,albatross\nd,albatross\n", ids=None)
    fs = import_generic(feats, lab, tax, name="g")
    np.testing.assert_array_equal(fs.features, x)
    assert fs.split.tolist() == [0, 0, 0, 0]
    assert fs.params == {"features_keyed_by": "row order", "split_column": False}


def test_label_problems_listed_with_rows(tmp_path):
    labels = (
        "id,leaf,split\n"
        "s1,sparrow,train\n"  # row 2
        "s1,tree,train\n"  # row 3: duplicate id
        "s2,owl,test\n"  # row 4: leaf not in taxonomy
        "s3,owl,test\n"  # row 5
        "s4,sparrow,tset\n"  # row 6: unknown split
        ",sparrow,train\n"  # row 7: empty id
    )
    err = bad(tmp_path, labels)
    assert err.source.endswith("labels.csv")
    p = err.problems
    assert "row 3: id 's1' repeats row 2" in p
    assert "row 6: split 'tset' is not one of train, val, test" in p
    assert "row 7: empty id" in p
    assert "leaf 'owl' (rows 4, 5) is not in tax.csv" in p
    assert any("1 leaves of tax.csv have no rows here (no samples): 'albatross'" in m for m in p)


def test_missing_columns(tmp_path):
    err = bad(tmp_path, "name,leaf\na,sparrow\n")
    assert "line 1: missing column id" in str(err)


def test_feature_id_mismatch(tmp_path):
    labels = "id,leaf\ns1,sparrow\ns2,tree\ns3,albatross\ns5,albatross\n"
    err = bad(tmp_path, labels)
    assert err.source.endswith("f.npz")
    assert "no features for id 's5' (labels.csv row 5)" in err.problems
    assert "1 feature ids are not in labels.csv (matched by id): 's4'" in err.problems


def test_feature_count_without_ids(tmp_path):
    err = bad(tmp_path, "id,leaf\na,sparrow\nb,tree\nc,albatross\n", ids=None)
    assert "4 feature rows but labels.csv lists 3 samples" in str(err)


def test_expected_dim(tmp_path):
    feats, lab, tax, _ = files(tmp_path, "id,leaf\ns1,sparrow\ns2,tree\ns3,albatross\ns4,albatross\n")
    with pytest.raises(InputError, match="features have 5 dimensions, expected 768"):
        import_generic(feats, lab, tax, name="g", expected_dim=768)


# -- any depth ------------------------------------------------------------------------------------------


def deep_files(tmp_path: Path, rows: list[tuple[str, ...]], header: list[str], extra: str = ""):
    """A taxonomy CSV of these rows, a labels CSV with two samples per leaf and an npz of features."""
    lines = [",".join(header) + (",note" if extra else "")]
    lines += [",".join(r) + (f",{extra}" if extra else "") for r in rows]
    (tmp_path / "tax.csv").write_text("\n".join(lines) + "\n")
    ids = [f"s{i}" for i in range(2 * len(rows))]
    leaves = [r[0] for r in rows for _ in range(2)]
    splits = ["train", "test"] * len(rows)
    (tmp_path / "labels.csv").write_text(
        "id,leaf,split\n"
        + "".join(f"{i},{leaf},{s}\n" for i, leaf, s in zip(ids, leaves, splits, strict=True))
    )
    x = np.arange(len(ids) * 3, dtype=np.float32).reshape(len(ids), 3)
    np.savez(tmp_path / "f.npz", features=x, ids=np.array(ids))
    return tmp_path / "f.npz", tmp_path / "labels.csv", tmp_path / "tax.csv"


@pytest.mark.parametrize("k", [2, 4, 12])
def test_a_taxonomy_of_k_level_columns(tmp_path, k):
    from tests.deep_trees import deep_rows

    rows = deep_rows(k, 20, np.random.default_rng(k))
    header = [f"rank{j}" for j in range(1, k + 1)]
    fs = import_generic(*deep_files(tmp_path, rows, header), name="g")
    assert fs.taxonomy.k == k and fs.taxonomy.level_names == tuple(header)
    assert fs.labels.shape == (40, k)
    # Each sample's ancestors, by a plain walk over the rows, equal its label row's names.
    by_leaf = {r[0]: r for r in rows}
    for i, leaf in enumerate(fs.taxonomy.leaves[j] for j in fs.leaf):
        assert tuple(fs.taxonomy.nodes[j][fs.labels[i, j]] for j in range(k)) == by_leaf[leaf]


def test_level_names_rename_the_header_columns_in_order(tmp_path):
    from tests.deep_trees import deep_rows

    rows = deep_rows(4, 12, np.random.default_rng(0))
    args = deep_files(tmp_path, rows, ["a", "b", "c", "d"])
    fs = import_generic(*args, name="g", level_names=("Species", "Genus", "Family", "Order"))
    assert fs.taxonomy.level_names == ("Species", "Genus", "Family", "Order")
    assert fs.taxonomy.levels.codes == ("species", "genus", "family", "order")
    with pytest.raises(InputError, match="--level-names gives 3 names .* the header names 4 levels"):
        import_generic(*args, name="g", level_names=("Species", "Genus", "Family"))


def test_a_column_beside_leaf_middle_high_is_a_level_not_dropped(tmp_path):
    # Only the header leaf,middle,high is the three-level layout: a fourth column is a level (leaf,middle,high,
    # top is four levels), never silently ignored.
    rows = [("sparrow", "Passer", "Passeridae"), ("tree", "Passer", "Passeridae"), ("alb", "Phoeb", "Diom")]
    fs = import_generic(*deep_files(tmp_path, rows, ["leaf", "middle", "high"], extra="x"), name="g")
    assert fs.taxonomy.k == 4 and fs.taxonomy.level_names == ("leaf", "middle", "high", "note")
    assert fs.taxonomy.rows() == [(*r, "x") for r in rows]
    three = import_generic(*deep_files(tmp_path, rows, ["leaf", "middle", "high"]), name="g")
    assert three.taxonomy.k == 3 and three.taxonomy.levels.codes == ("leaf", "middle", "high")
    assert three.taxonomy.rows() == rows


def test_a_deep_conflict_names_both_parents_with_rows(tmp_path):
    rows = [("a", "g1", "f1", "o1"), ("b", "g1", "f2", "o1"), ("c", "g2", "f2", "o1")]
    err = bad_deep(tmp_path, rows, ["species", "genus", "family", "order"])
    assert "genus 'g1' is under 2 family values: 'f1' (row 2); 'f2' (row 3)" in str(err)


def bad_deep(tmp_path, rows, header) -> InputError:
    with pytest.raises(InputError) as err:
        import_generic(*deep_files(tmp_path, rows, header), name="g")
    return err.value


@pytest.mark.slow
def test_cli_level_names_that_do_not_fit_the_header_change_nothing(tmp_path):
    from tests.deep_trees import deep_rows
    from tests.reliability.conftest import cli, one_line_error, tree_digest

    rows = deep_rows(4, 12, np.random.default_rng(0))
    f, labels, tax = deep_files(tmp_path, rows, ["species", "genus", "family", "order"])
    before = tree_digest(tmp_path)
    home = tmp_path / "home"
    argv = ["import", "generic", str(f), str(labels), str(tax), "--name", "g"]
    text = one_line_error(cli(home, *argv, "--level-names", "Species,Genus,Family"))
    assert "--level-names gives 3 names (Species,Genus,Family) but the header names 4 levels" in text
    done = cli(home, *argv, "--level-names", "Species")
    assert done.returncode == 2 and "give 2 to 12 names" in done.stderr
    assert not home.exists() and tree_digest(tmp_path) == before


@pytest.mark.slow
def test_cli_level_names_repeating_ignoring_case_are_refused(tmp_path):
    # Genus and genus would be one level to every level reference (`Levels.index` ignores case).
    from tests.reliability.conftest import cli, one_line_error, tree_digest

    rows = [("a", "g1"), ("b", "g1"), ("c", "g2")]
    f, labels, tax = deep_files(tmp_path, rows, ["species", "genus"])
    (tmp_path / "dup.csv").write_text("Genus,GENUS\n" + "".join(f"{a},{b}\n" for a, b in rows))
    before = tree_digest(tmp_path)
    home = tmp_path / "home"
    argv = ["import", "generic", str(f), str(labels), str(tax), "--name", "g"]
    text = one_line_error(cli(home, *argv, "--level-names", "Genus,genus"))
    assert "level names repeat ignoring case: Genus, genus" in text
    text = one_line_error(
        cli(home, "import", "generic", str(f), str(labels), str(tmp_path / "dup.csv"), "--name", "g")
    )
    assert "dup.csv" in text and "level names repeat ignoring case: Genus, GENUS" in text
    assert not home.exists() and tree_digest(tmp_path) == before
