import numpy as np
import pytest

from hierconsole.datasets import import_cub
from hierconsole.errors import InputError
from hierconsole.vocabulary import CUB_LEVEL_NAMES


def run_bad(cub, features=None, taxonomy=None) -> InputError:
    before = cub.tree()
    with pytest.raises(InputError) as err:
        import_cub(cub.root, features or cub.features, taxonomy or cub.taxonomy)
    assert cub.tree() == before  # a failed import writes nothing
    return err.value


def test_import_cub_aligns_rows_and_matches_names(cub):
    before = cub.tree()
    fs = import_cub(cub.root, cub.features, cub.taxonomy)
    assert cub.tree() == before
    assert fs.kind == "cub" and fs.name == "cub"
    assert fs.ids.tolist() == cub.ids
    np.testing.assert_array_equal(fs.features, cub.x)  # reordered from the file's id order
    tax = fs.taxonomy
    assert tax.level_names == CUB_LEVEL_NAMES
    # leaves take classes.txt names, in class id order, whatever spelling the CSV used
    assert tax.leaves == (
        "001.Black_footed_Albatross",
        "002.Laysan_Albatross",
        "003.Sooty Albatross",
        "004.Groove_billed_Ani",
    )
    assert tax.nodes[1] == ("Phoebastria", "Phoebetria", "Crotophaga")
    assert fs.leaf.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert fs.split.tolist() == [0, 0, 2] * 4
    assert fs.labels[6].tolist() == [2, 1, 0]
    assert fs.params["features_keyed_by"] == "image id"
    assert fs.params["leaves_matched_by"] == {
        "full name": 2,
        "name without prefix": 1,
        "case/underscore-insensitive": 1,
    }
    assert len(fs.sources) == 6 and all(len(h) == 64 for h in fs.sources.values())


@pytest.mark.parametrize("prefix", ["", "images/"])
def test_features_keyed_by_relative_path(cub, tmp_path, prefix):
    path = tmp_path / "by_path.npz"
    np.savez(path, features=cub.x[::-1], ids=np.array([prefix + p for p in cub.paths[::-1]]))
    fs = import_cub(cub.root, path, cub.taxonomy)
    np.testing.assert_array_equal(fs.features, cub.x)
    assert fs.params["features_keyed_by"] == ("relative path" if not prefix else "images/ path")


def test_features_without_ids_follow_images_txt(cub, tmp_path):
    path = tmp_path / "plain.npy"
    np.save(path, cub.x)
    np.testing.assert_array_equal(import_cub(cub.root, path, cub.taxonomy).features, cub.x)
    np.save(path, cub.x[:-1])
    err = run_bad(cub, features=path)
    assert "11 feature rows but images.txt lists 12 samples" in str(err)


def test_integer_ids_in_features_file(cub, tmp_path):
    path = tmp_path / "int_ids.npz"
    np.savez(path, features=cub.x, ids=np.arange(1, 13))
    np.testing.assert_array_equal(import_cub(cub.root, path, cub.taxonomy).features, cub.x)


def test_directory_problems_are_all_reported_with_lines(cub):
    images = cub.lines("images.txt")
    cub.set_lines("images.txt", [*images[:3], "13", images[1], *images[3:]])  # malformed, then a repeat
    labels = cub.lines("image_class_labels.txt")
    cub.set_lines("image_class_labels.txt", [*labels[:-1], "99 1", "12 7"])  # unknown image and class
    flags = cub.lines("train_test_split.txt")
    cub.set_lines("train_test_split.txt", [*flags[:4], "5 2", *flags[5:-1]])  # bad value; image 12 missing
    err = run_bad(cub)
    text = str(err)
    assert str(cub.root) in text
    assert "images.txt line 4: expected '<image_id> <path>', got '13'" in text
    assert "images.txt line 5: image_id '2' repeats line 2" in text
    assert "image_class_labels.txt line 12: image id '99' is not in images.txt" in text
    assert "image_class_labels.txt line 13: class id '7' of image '12' is not in classes.txt" in text
    assert "train_test_split.txt line 5: split flag '2' for image '5' is not 1 (train) or 0 (test)" in text
    assert "images.txt line 14: image '12' has no line in train_test_split.txt" in text


def test_missing_file(cub):
    cub.file("classes.txt").unlink()
    assert "classes.txt: missing" in str(run_bad(cub))


def test_taxonomy_problems_name_rows(cub, tmp_path):
    tax = tmp_path / "bad_tax.csv"
    tax.write_text(
        "leaf,middle,high\n"
        "001.Black_footed_Albatross,Phoebastria,Diomedeidae\n"  # row 2
        "Black_footed_Albatross,Phoebastria,Diomedeidae\n"  # row 3: same class again
        "Laysan_Albatross,Phoebastria,Procellariidae\n"  # row 4: genus under a second family
        "Nonexistent Bird,X,Y\n"  # row 5: unmatched
        ",Z,Y\n"  # row 6: empty leaf
    )
    err = run_bad(cub, taxonomy=tax)
    text = str(err)
    assert "bad_tax.csv row 5: leaf 'Nonexistent Bird' matches no class in classes.txt" in text
    assert "bad_tax.csv rows 2 and 3 both name class '001.Black_footed_Albatross'" in text
    assert "bad_tax.csv row 6: empty leaf name" in text
    assert "classes.txt line 3: class '003.Sooty Albatross' (3 images) has no row in bad_tax.csv" in text
    assert "classes.txt line 4: class '004.Groove_billed_Ani' (3 images) has no row in bad_tax.csv" in text
    assert any("Genus 'Phoebastria' is under 2 Family values" in p and "(row 4)" in p for p in err.problems)


def test_taxonomy_leaf_without_images(cub):
    lines = cub.lines("classes.txt")
    cub.set_lines("classes.txt", [*lines, "5 005.Crested_Auklet"])
    cub.taxonomy.write_text(cub.taxonomy.read_text() + "Crested_Auklet,Aethia,Alcidae\n")
    err = run_bad(cub)
    assert (
        "cub_taxonomy.csv row 6: Class '005.Crested_Auklet' has no images in image_class_labels.txt"
        in str(err)
    )


def test_feature_problems(cub, tmp_path):
    x = cub.x.copy()
    x[[2, 5]] = np.nan
    path = tmp_path / "nan.npz"
    np.savez(path, features=x, ids=np.array(cub.ids))
    err = run_bad(cub, features=path)
    assert "NaN or infinite values on rows 2 (id '3'), 5 (id '6')" in str(err)
    assert str(path) in str(err)

    np.savez(path, features=cub.x[:-1], ids=np.array(cub.ids[:-1]))
    err = run_bad(cub, features=path)
    assert f"no features for image '12' ({cub.paths[-1]}, images.txt line 12)" in str(err)

    np.savez(path, features=np.vstack([cub.x, cub.x[:1]]), ids=np.array([*cub.ids, "77"]))
    assert "1 feature ids are not in images.txt (matched by image id): '77'" in str(
        run_bad(cub, features=path)
    )

    np.savez(path, features=cub.x, ids=np.array([*cub.ids[:-1], "1"]))
    err = run_bad(cub, features=path)
    assert "id '1' appears on rows 0, 11" in str(err)

    np.save(tmp_path / "flat.npy", cub.x.ravel())
    assert "1-D array" in str(run_bad(cub, features=tmp_path / "flat.npy"))
