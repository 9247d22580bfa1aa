import hashlib
import json

import numpy as np
import polars as pl
import pytest

from hierconsole.datasets import FeatureSet
from hierconsole.errors import InputError
from hierconsole.taxonomy import Taxonomy, development_shuffle
from hierconsole.vocabulary import CUB_LEVEL_NAMES


def small(**over) -> FeatureSet:
    tax = Taxonomy.from_rows(
        [("a", "M1", "H1"), ("b", "M1", "H1"), ("c", "M2", "H1"), ("d", "M3", "H2"), ("e", "M3", "H2")],
        level_names=CUB_LEVEL_NAMES,
    )
    rng = np.random.default_rng(0)
    kw = dict(
        name="small",
        features=rng.standard_normal((6, 4)).astype(np.float32),
        ids=np.array(["x0", "x1", "x2", "x3", "x4", "x5"]),
        leaf=np.array([0, 1, 2, 3, 4, 4]),
        split=np.array([0, 0, 1, 2, 2, 2]),
        taxonomy=tax,
        kind="generic",
        sources={"/in/f.npy": "0" * 64},
        params={"k": [1, 2]},
    )
    kw.update(over)
    return FeatureSet(**kw)


def test_labels_and_dim():
    fs = small()
    assert fs.dim == 4 and len(fs) == 6
    assert fs.labels.tolist() == [[0, 0, 0], [1, 0, 0], [2, 1, 0], [3, 2, 1], [4, 2, 1], [4, 2, 1]]
    assert fs.split_counts() == {"train": 2, "val": 1, "test": 3}


def test_save_load_roundtrip(tmp_path):
    fs = small()
    fs.save(tmp_path / "ds")
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == [
        "features.npy",
        "manifest.json",
        "samples.npz",
        "samples.parquet",
        "taxonomy.csv",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no temporary folder left behind
    samples = pl.read_parquet(tmp_path / "ds" / "samples.parquet")
    assert samples.columns == ["id", "leaf", "split"]
    assert (tmp_path / "ds" / "taxonomy.csv").read_text().splitlines()[0] == "leaf,middle,high"
    back = FeatureSet.load(tmp_path / "ds")
    assert back.sha256() == fs.sha256()
    np.testing.assert_array_equal(back.features, fs.features)
    assert back.ids.tolist() == fs.ids.tolist()
    assert (back.name, back.kind, back.sources, back.params) == (fs.name, fs.kind, fs.sources, fs.params)
    assert back.taxonomy.level_names == CUB_LEVEL_NAMES


def test_the_two_sample_tables_hold_the_same_columns(tmp_path):
    fs = small()
    fs.save(tmp_path / "ds")
    parquet = pl.read_parquet(tmp_path / "ds" / "samples.parquet")
    with np.load(tmp_path / "ds" / "samples.npz", allow_pickle=False) as z:
        assert z["id"].tolist() == parquet["id"].to_list()
        np.testing.assert_array_equal(z["leaf"], parquet["leaf"].to_numpy())
        np.testing.assert_array_equal(z["split"], parquet["split"].to_numpy())
        assert (z["leaf"].dtype, z["split"].dtype) == (np.int64, np.int8)


def test_a_folder_without_the_npz_table_loads_from_parquet(tmp_path):
    # As saved before the npz table existed.
    fs = small()
    fs.save(tmp_path / "ds")
    (tmp_path / "ds" / "samples.npz").unlink()
    back = FeatureSet.load(tmp_path / "ds")
    assert back.sha256() == fs.sha256() and back.ids.tolist() == fs.ids.tolist()


def test_a_changed_npz_table_is_refused_by_the_content_hash(tmp_path):
    fs = small()
    fs.save(tmp_path / "ds")
    path = tmp_path / "ds" / "samples.npz"
    with np.load(path) as z:
        parts = {k: z[k] for k in z.files}
    parts["split"] = parts["split"][::-1].copy()
    np.savez(path, **parts)
    with pytest.raises(InputError, match="does not match the sha256"):
        FeatureSet.load(tmp_path / "ds")


def test_save_replaces_and_keeps_shuffled_order(tmp_path):
    fs = small()
    fs.save(tmp_path / "ds")
    fs.taxonomy = development_shuffle(fs.taxonomy, range(len(fs.taxonomy.leaves)), seed=3).taxonomy
    fs.save(tmp_path / "ds")
    back = FeatureSet.load(tmp_path / "ds")
    assert back.taxonomy.sha256() == fs.taxonomy.sha256()
    assert back.labels.tolist() == fs.labels.tolist()
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_load_detects_changed_content(tmp_path):
    fs = small()
    fs.save(tmp_path / "ds")
    x = np.load(tmp_path / "ds" / "features.npy")
    x[0, 0] += 1
    np.save(tmp_path / "ds" / "features.npy", x)
    with pytest.raises(InputError, match="does not match the sha256"):
        FeatureSet.load(tmp_path / "ds")


def test_sha256_covers_each_part():
    base = small().sha256()
    assert small().sha256() == base
    x = small().features.copy()
    x[5, 3] = np.nextafter(x[5, 3], np.float32(9))
    assert small(features=x).sha256() != base
    assert small(ids=np.array(["x0", "x1", "x2", "x3", "x4", "y5"])).sha256() != base
    assert small(leaf=np.array([0, 1, 2, 3, 4, 3])).sha256() != base
    assert small(split=np.array([0, 0, 1, 2, 2, 0])).sha256() != base
    assert small(name="other", kind="cub").sha256() == base  # content, not labels of the set


def test_sha256_matches_documented_recipe():
    fs = small()
    tax = fs.taxonomy
    doc = {
        "level_names": list(tax.level_names),
        "leaves": list(tax.leaves),
        "middles": list(tax.nodes[1]),
        "highs": list(tax.nodes[2]),
        "leaf_middle": tax.parents[0].tolist(),
        "middle_high": tax.parents[1].tolist(),
    }
    tax_hash = hashlib.sha256(json.dumps(doc, ensure_ascii=False).encode()).hexdigest()
    assert tax.sha256() == tax_hash
    h = hashlib.sha256()
    h.update(np.array([6, 4], dtype="<i8").tobytes())
    h.update(fs.features.astype("<f4").tobytes())
    h.update(json.dumps(fs.ids.tolist()).encode())
    h.update(fs.leaf.astype("<i8").tobytes())
    h.update(fs.split.astype("i1").tobytes())
    h.update(tax_hash.encode())
    assert fs.sha256() == h.hexdigest()


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"ids": np.array(["x0", "x0", "x2", "x3", "x4", "x5"])}, "ids are not unique"),
        ({"leaf": np.array([0, 1, 2, 3, 4, 5])}, "leaf labels outside the taxonomy"),
        ({"split": np.array([0, 0, 1, 2, 2, 3])}, "split codes outside"),
        ({"features": np.full((6, 4), np.nan, dtype=np.float32)}, "NaN"),
        ({"features": np.zeros((5, 4), dtype=np.float32)}, "shape"),
        ({"kind": "imagenet"}, "kind 'imagenet'"),
    ],
)
def test_construction_is_checked(over, message):
    with pytest.raises(InputError, match=message):
        small(**over)


# -- any depth ------------------------------------------------------------------------------------------


def test_three_levels_keep_the_layout_every_saved_set_has(tmp_path):
    small().save(tmp_path / "ds")
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["format_version"] == 1
    assert manifest["taxonomy_order"] == {"middles": ["M1", "M2", "M3"], "highs": ["H1", "H2"]}


@pytest.mark.parametrize("k", [2, 5, 12])
def test_a_deep_set_saves_its_level_codes_and_every_level_order(tmp_path, k):
    from tests.deep_trees import deep_featureset

    names = [f"Rank {i}" for i in range(1, k + 1)]
    fs = deep_featureset(k, names=names)
    fs.save(tmp_path / "ds")
    header = (tmp_path / "ds" / "taxonomy.csv").read_text().splitlines()[0]
    assert header == ",".join(f"rank{i}" for i in range(1, k + 1))
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["format_version"] == 2
    assert manifest["taxonomy_order"] == {"levels": [list(level) for level in fs.taxonomy.nodes[1:]]}
    back = FeatureSet.load(tmp_path / "ds")
    assert back.sha256() == fs.sha256()
    assert back.taxonomy.nodes == fs.taxonomy.nodes and back.taxonomy.level_names == tuple(names)
    assert back.labels.shape == (len(fs), k) and back.labels.tolist() == fs.labels.tolist()


def test_a_deep_shuffled_taxonomy_keeps_its_index_order(tmp_path):
    from tests.deep_trees import deep_featureset

    fs = deep_featureset(5)
    fs.taxonomy = development_shuffle(fs.taxonomy, range(fs.taxonomy.n_leaves), seed=3).taxonomy
    fs.save(tmp_path / "ds")
    back = FeatureSet.load(tmp_path / "ds")
    assert back.taxonomy.sha256() == fs.taxonomy.sha256()
    assert back.labels.tolist() == fs.labels.tolist()


def test_a_newer_folder_format_is_refused_in_one_line(tmp_path):
    small().save(tmp_path / "ds")
    path = tmp_path / "ds" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["format_version"] = 3
    path.write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="format 3 is newer"):
        FeatureSet.load(tmp_path / "ds")
