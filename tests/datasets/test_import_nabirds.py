import numpy as np
import pytest

from hierconsole.datasets import import_nabirds
from hierconsole.errors import InputError
from hierconsole.vocabulary import NABIRDS_LEVEL_NAMES


def run_bad(nabirds, features=None) -> InputError:
    before = nabirds.tree()
    with pytest.raises(InputError) as err:
        import_nabirds(nabirds.root, features or nabirds.features)
    assert nabirds.tree() == before
    return err.value


def test_import_nabirds_tree_levels(nabirds):
    before = nabirds.tree()
    fs = import_nabirds(nabirds.root, nabirds.features)
    assert nabirds.tree() == before
    assert fs.kind == "nabirds" and len(fs) == 16
    assert fs.ids.tolist() == nabirds.ids
    np.testing.assert_array_equal(fs.features, nabirds.x)
    tax = fs.taxonomy
    assert tax.level_names == NABIRDS_LEVEL_NAMES
    # leaves are the classes images use, in class id order; the unused node 300 is not one
    rows = dict((leaf, (mid, high)) for leaf, mid, high in tax.rows())
    assert list(rows) == [
        "Black-capped Chickadee",
        "Carolina Chickadee",
        "Song Sparrow",
        "Dark-eyed Junco [111]",
        "Dark-eyed Junco [112]",
        "Red-winged Blackbird",
        "Mallard (Male)",
        "Mallard (Female/juvenile)",
    ]
    assert rows["Carolina Chickadee"] == ("Chickadees", "Perching Birds")
    assert rows["Dark-eyed Junco [112]"] == ("Sparrows", "Perching Birds")
    assert rows["Mallard (Male)"] == ("Ducks", "Waterfowl")
    # a leaf directly under a supergroup has that node as Parent and Supergroup
    assert rows["Red-winged Blackbird"] == ("Perching Birds", "Perching Birds")
    assert any("also used as supergroup names: 'Perching Birds'" in w for w in tax.summary().warnings)
    assert fs.leaf.tolist() == [i for i in range(8) for _ in range(2)]
    assert fs.split.tolist() == [0, 2] * 8
    assert fs.params["tree_root"] == {"id": "0", "name": "Birds"}
    assert fs.params["features_keyed_by"] == "image id"


def test_features_keyed_by_path(nabirds, tmp_path):
    path = tmp_path / "by_path.npz"
    np.savez(path, features=nabirds.x[::-1], ids=np.array(nabirds.paths[::-1]))
    fs = import_nabirds(nabirds.root, path)
    np.testing.assert_array_equal(fs.features, nabirds.x)
    assert fs.params["features_keyed_by"] == "relative path"


def test_hierarchy_problems(nabirds):
    edges = nabirds.lines("hierarchy.txt")
    # line 15: a second parent for 100; line 16: unknown ids; line 17: malformed
    nabirds.set_lines("hierarchy.txt", [*edges, "100 11", "998 999", "300"])
    text = str(run_bad(nabirds))
    assert "hierarchy.txt line 15: child_id '100' repeats line 6" in text
    assert "hierarchy.txt line 16: child '998' and parent '999' not in classes.txt" in text
    assert "hierarchy.txt line 17: expected '<child_id> <parent_id>', got '300'" in text


def test_tree_shape_problems(nabirds):
    edges = [
        e for e in nabirds.lines("hierarchy.txt") if not e.startswith(("110 ", "111 ", "200 ", "201 ", "10 "))
    ]
    edges += ["200 201", "201 200"]
    nabirds.set_lines("hierarchy.txt", edges)
    err = run_bad(nabirds)
    text = str(err)
    assert str(nabirds.root / "hierarchy.txt") in text
    assert "class 'Song Sparrow' (id 110) is used by images but has no parent in hierarchy.txt" in text
    assert "class 'Dark-eyed Junco' (id 111) is used by images but has no parent" in text
    assert text.count("a cycle through") == 1
    assert "hierarchy.txt: a cycle through class ids 200 -> 201 -> 200" in text
    # 100 and 101 now end at node 10, which lost its parent: a second root
    assert "the leaves reach 2 different roots: 0 'Birds' (2 leaves), 10 'Chickadees' (2 leaves)" in text


def test_leaf_directly_under_root(nabirds):
    edges = [e for e in nabirds.lines("hierarchy.txt") if not e.startswith("111 ")]
    nabirds.set_lines("hierarchy.txt", [*edges, "111 0"])
    text = str(run_bad(nabirds))
    assert "class 'Dark-eyed Junco' (id 111) hangs directly under the root 'Birds'" in text


def test_directory_problems(nabirds):
    labels = nabirds.lines("image_class_labels.txt")
    bad_uuid = nabirds.ids[3]
    nabirds.set_lines("image_class_labels.txt", [*labels[:3], f"{bad_uuid} 555", *labels[4:]])
    flags = nabirds.lines("train_test_split.txt")
    nabirds.set_lines("train_test_split.txt", [*flags[:-1], f"{nabirds.ids[-1]} yes"])
    text = str(run_bad(nabirds))
    assert (
        f"image_class_labels.txt line 4: class id '555' of image '{bad_uuid}' is not in classes.txt" in text
    )
    assert f"train_test_split.txt line 16: split flag 'yes' for image '{nabirds.ids[-1]}'" in text


def test_missing_hierarchy_and_features(nabirds, tmp_path):
    path = tmp_path / "short.npz"
    np.savez(path, features=nabirds.x[1:], ids=np.array(nabirds.ids[1:]))
    text = str(run_bad(nabirds, features=path))
    assert f"no features for image '{nabirds.ids[0]}' ({nabirds.paths[0]}, images.txt line 1)" in text
    nabirds.file("hierarchy.txt").unlink()
    assert "hierarchy.txt: missing" in str(run_bad(nabirds))
