"""`import inat` on generated files in the exact iNaturalist annotation format (2021, 2018, 2017)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hierconsole.datasets.featureset import FeatureSet
from hierconsole.datasets.inat import import_inat, parse_levels
from hierconsole.errors import ConfigError, InputError
from tests.deep_trees import INAT_RANKS, inat_rows, write_inat_json
from tests.reliability.conftest import cli, one_line_error, tree_digest

N_SPECIES = 15
DIM = 6


def inat_files(tmp_path: Path, *, year: int = 2021, rows=None, ids_in_features: bool = True):
    """train.json (3 images a species), val.json (1 a species) and features.npz keyed by image id."""
    rng = np.random.default_rng(year)
    rows = rows or inat_rows(N_SPECIES, rng)
    if year == 2017:
        rows = [(r[0], r[-1]) for r in rows]
    n = len(rows)
    train_ids = [100_000 + i for i in range(3 * n)]
    val_ids = [900_000 + i for i in range(n)]
    cat_ids = [7 * i + 3 for i in range(n)]  # ids need not be positions
    write_inat_json(
        tmp_path / "train.json",
        rows,
        train_ids,
        [i % n for i in range(3 * n)],
        year=year,
        category_ids=cat_ids,
    )
    write_inat_json(tmp_path / "val.json", rows, val_ids, list(range(n)), year=year, category_ids=cat_ids)
    all_ids = train_ids + val_ids
    x = rng.standard_normal((len(all_ids), DIM)).astype(np.float32)
    perm = rng.permutation(len(all_ids))  # features in their own order: matched by image id
    if ids_in_features:
        np.savez(tmp_path / "f.npz", features=x[perm], ids=np.array([str(all_ids[p]) for p in perm]))
    else:
        np.savez(tmp_path / "f.npz", features=x)
    return tmp_path / "f.npz", tmp_path / "train.json", tmp_path / "val.json", rows, all_ids, x


def test_seven_ranks_of_a_2021_file(tmp_path):
    f, train, val, rows, all_ids, x = inat_files(tmp_path)
    fs = import_inat(f, train, val, name="inat")
    tax = fs.taxonomy
    assert tax.k == 7 and tax.levels.codes == INAT_RANKS
    assert tax.level_names == ("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom")
    assert fs.split_counts() == {"train": 3 * N_SPECIES, "val": 0, "test": N_SPECIES}
    # Each image's features and its seven names, by a plain walk over the generated rows.
    by_id = dict(zip(map(str, all_ids), range(len(all_ids)), strict=True))
    n = len(rows)
    for i, sid in enumerate(fs.ids.tolist()):
        j = by_id[sid]
        np.testing.assert_array_equal(fs.features[i], x[j])
        species = j % n if j < 3 * n else j - 3 * n
        assert tuple(tax.nodes[k][fs.labels[i, k]] for k in range(7)) == rows[species]
    assert fs.kind == "inat" and fs.params["levels"] == list(INAT_RANKS)


def test_a_subset_of_ranks(tmp_path):
    f, train, val, rows, _, _ = inat_files(tmp_path)
    fs = import_inat(f, train, val, name="inat", levels=parse_levels("species,genus,family,order"))
    assert fs.taxonomy.levels.codes == ("species", "genus", "family", "order")
    assert set(fs.taxonomy.rows()) == {r[:4] for r in rows}


def test_a_coarser_leaf_merges_the_species(tmp_path):
    f, train, val, rows, _, _ = inat_files(tmp_path)
    fs = import_inat(f, train, val, name="inat", levels=("genus", "family", "kingdom"))
    assert fs.taxonomy.n_leaves == len({r[1] for r in rows}) and len(fs) == 4 * N_SPECIES


def test_2018_and_2017_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    f, train, val, *_ = inat_files(tmp_path / "a", year=2018)
    assert import_inat(f, train, val, name="i").taxonomy.k == 7
    f, train, val, rows, *_ = inat_files(tmp_path / "b", year=2017)
    fs = import_inat(f, train, val, name="i")
    assert fs.taxonomy.levels.codes == ("species", "supercategory") and set(fs.taxonomy.rows()) == set(rows)


def test_features_without_ids_follow_the_annotations(tmp_path):
    f, train, val, _, _, x = inat_files(tmp_path, ids_in_features=False)
    fs = import_inat(f, train, val, name="i")
    np.testing.assert_array_equal(fs.features, x)


def test_a_rank_conflict_names_the_categories(tmp_path):
    rows = inat_rows(N_SPECIES, np.random.default_rng(1))
    other = next(r for r in rows if r[2] != rows[0][2])
    # The genus of species 0 is placed in a second family by species 1.
    rows[1] = (rows[1][0], rows[0][1], other[2], *other[3:])
    f, train, val, *_ = inat_files(tmp_path, rows=rows)
    with pytest.raises(InputError) as err:
        import_inat(f, train, val, name="i")
    text = str(err.value)
    assert f"Genus {rows[0][1]!r} is under 2 Family values: {rows[0][2]!r} (category id 3); " in text
    assert f"{other[2]!r} (category id 10)" in text and "train.json categories" in text


def test_parse_levels_refuses_bad_values():
    assert parse_levels("Species, genus") == ("species", "genus")
    for bad, message in [
        ("species,bogus", "'bogus' is not an iNat rank"),
        ("genus,species", "out of order"),
        ("species", "2 or more"),
        ("species,species", "2 or more"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_levels(bad)


def test_a_test_file_without_labels_is_refused(tmp_path):
    f, train, val, *_ = inat_files(tmp_path)
    doc = json.loads(val.read_text())
    del doc["annotations"]
    val.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="no annotations"):
        import_inat(f, train, val, name="i")


@pytest.mark.slow
def test_cli_refuses_a_bad_levels_value_and_creates_nothing(tmp_path):
    f, train, val, *_ = inat_files(tmp_path)
    home = tmp_path / "home"
    before = tree_digest(tmp_path)
    text = one_line_error(
        cli(home, "import", "inat", str(f), "--train", str(train), "--levels", "species,bogus")
    )
    assert "--levels 'species,bogus': 'bogus' is not an iNat rank" in text
    text = one_line_error(
        cli(
            home,
            "import",
            "inat",
            str(f),
            "--train",
            str(train),
            "--val",
            str(val),
            "--levels",
            "species,supercategory",
        )
    )
    assert "supercategory not in train.json" in text and "species, genus, family" in text
    assert not home.exists() and tree_digest(tmp_path) == before


@pytest.mark.slow
def test_cli_imports_seven_ranks_into_a_store(tmp_path):
    f, train, val, *_ = inat_files(tmp_path)
    done = cli(tmp_path / "home", "import", "inat", str(f), "--train", str(train), "--val", str(val))
    assert done.returncode == 0, done.stderr
    assert "15/" in done.stdout and "Species/Genus/Family/Order/Class/Phylum/Kingdom" in done.stdout
    back = FeatureSet.load(tmp_path / "home" / "datasets" / "inat")
    assert back.taxonomy.k == 7


@pytest.mark.slow
def test_cli_refuses_rank_values_that_are_not_names_and_creates_nothing(tmp_path):
    # A null genus became a node named "None"; a null species name crashed with AttributeError.
    f, train, val, *_ = inat_files(tmp_path)
    for path in (train, val):  # the two files of one release carry the same categories
        doc = json.loads(path.read_text())
        doc["categories"][0]["genus"] = None
        doc["categories"][1]["family"] = 5
        doc["categories"][2]["name"] = None
        doc["categories"][3]["order"] = "  "
        path.write_text(json.dumps(doc))
    home = tmp_path / "home"
    before = tree_digest(tmp_path)
    text = one_line_error(cli(home, "import", "inat", str(f), "--train", str(train), "--val", str(val)))
    assert "train.json" in text and "category ids 3, 10, 17, 24" in text, text
    assert not home.exists() and tree_digest(tmp_path) == before
