import numpy as np
import polars as pl
import pytest
import torch
from safetensors.numpy import save_file

from hierconsole.datasets.features_io import align_rows, read_features
from hierconsole.errors import InputError

X = np.arange(24, dtype=np.float64).reshape(4, 6) / 7.0
IDS = ["a", "b", "c", "d"]


def writers(tmp_path):
    """Each supported way to store X (and IDS where the format allows): name -> (path, expected ids)."""
    out = {}
    p = tmp_path / "x.npy"
    np.save(p, X)
    out["npy"] = (p, None)
    p = tmp_path / "x.npz"
    np.savez(p, features=X, ids=np.array(IDS))
    out["npz"] = (p, IDS)
    p = tmp_path / "noids.npz"
    np.savez(p, features=X)
    out["npz-no-ids"] = (p, None)
    p = tmp_path / "list.parquet"
    pl.DataFrame({"id": IDS, "features": X.tolist()}).write_parquet(p)
    out["parquet-list"] = (p, IDS)
    p = tmp_path / "array.parquet"
    pl.DataFrame({"id": IDS, "features": pl.Series(X.tolist(), dtype=pl.Array(pl.Float32, 6))}).write_parquet(
        p
    )
    out["parquet-array"] = (p, IDS)
    p = tmp_path / "cols.parquet"
    pl.DataFrame({"id": IDS, **{f"f{j}": X[:, j] for j in range(6)}}).write_parquet(p)
    out["parquet-columns"] = (p, IDS)
    p = tmp_path / "x.safetensors"
    save_file({"features": X.astype(np.float32), "ids": np.array([10, 11, 12, 13])}, str(p))
    out["safetensors"] = (p, ["10", "11", "12", "13"])
    p = tmp_path / "t.pt"
    torch.save(torch.tensor(X), p)
    out["pt-tensor"] = (p, None)
    p = tmp_path / "d.pt"
    torch.save({"features": torch.tensor(X, dtype=torch.bfloat16).float(), "ids": IDS}, p)
    out["pt-dict"] = (p, IDS)
    return out


def test_every_format_reads_the_same(tmp_path):
    for name, (path, ids) in writers(tmp_path).items():
        got_ids, got = read_features(path, expected_dim=6)
        assert got.dtype == np.float32 and got.shape == (4, 6), name
        np.testing.assert_allclose(
            got, X.astype(np.float32), rtol=1e-2 if name == "pt-dict" else 0, err_msg=name
        )
        if ids is None:
            assert got_ids is None, name
        else:
            assert got_ids.tolist() == ids, name


def test_nan_rows_named(tmp_path):
    x = X.copy()
    x[1, 2] = np.nan
    x[3, 0] = np.inf
    p = tmp_path / "bad.npz"
    np.savez(p, features=x, ids=np.array(IDS))
    with pytest.raises(InputError) as err:
        read_features(p)
    assert str(p) in str(err.value)
    assert "NaN or infinite values on rows 1 (id 'b'), 3 (id 'd') (0-based; 2 in all)" in str(err.value)
    np.save(tmp_path / "bad.npy", x)
    with pytest.raises(InputError, match=r"on rows 1, 3 \(0-based"):
        read_features(tmp_path / "bad.npy")


def test_many_nan_rows_are_counted(tmp_path):
    x = np.full((30, 2), np.nan)
    np.save(tmp_path / "n.npy", x)
    with pytest.raises(InputError, match=r"0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 20 more \(0-based; 30 in all\)"):
        read_features(tmp_path / "n.npy")


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros(5), "a 1-D array of shape (5,)"),
        (np.zeros((2, 3, 4)), "a 3-D array"),
        (np.zeros((0, 3)), "no rows"),
        (np.array([["x", "y"]]), "not numbers"),
    ],
)
def test_wrong_shapes(tmp_path, array, message):
    np.save(tmp_path / "w.npy", array)
    with pytest.raises(InputError) as err:
        read_features(tmp_path / "w.npy")
    assert message in str(err.value)


def test_expected_dim(tmp_path):
    np.save(tmp_path / "d.npy", X)
    with pytest.raises(InputError, match="features have 6 dimensions, expected 768"):
        read_features(tmp_path / "d.npy", expected_dim=768)


def test_id_problems(tmp_path):
    p = tmp_path / "dup.npz"
    np.savez(p, features=X, ids=np.array(["a", "b", "a", "a"]))
    with pytest.raises(InputError, match=r"id 'a' appears on rows 0, 2, 3"):
        read_features(p)
    np.savez(p, features=X, ids=np.array(["a", "b"]))
    with pytest.raises(InputError, match="2 ids for 4 feature rows"):
        read_features(p)


def test_file_level_problems(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_features(tmp_path / "none.npy")
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(InputError, match="unknown features format '.csv'"):
        read_features(tmp_path / "x.csv")
    np.savez(tmp_path / "other.npz", emb=X)
    with pytest.raises(InputError, match=r"no array named 'features' \(arrays: emb\)"):
        read_features(tmp_path / "other.npz")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="cannot read the file as .npy"):
        read_features(tmp_path / "obj.npy")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="cannot read the file as .parquet"):
        read_features(tmp_path / "junk.parquet")


class Evil:
    """An arbitrary object: torch.load(weights_only=True) must refuse to unpickle it."""


def test_pt_is_loaded_weights_only(tmp_path):
    p = tmp_path / "evil.pt"
    torch.save({"features": torch.zeros(2, 2), "payload": Evil()}, p)
    with pytest.raises(InputError, match="cannot read the file as .pt"):
        read_features(p)
    torch.save({"emb": torch.zeros(2, 2)}, p)
    with pytest.raises(InputError, match="no 'features' key"):
        read_features(p)


def test_parquet_problems(tmp_path):
    p = tmp_path / "ragged.parquet"
    pl.DataFrame({"id": ["a", "b", "c"], "features": [[1.0, 2.0], [1.0], [3.0, 4.0]]}).write_parquet(p)
    with pytest.raises(InputError, match=r"row 0 has 2, row 1 \(0-based; 1 in all\) differ"):
        read_features(p)
    pl.DataFrame({"id": ["a"], "f0": [1.0], "label": ["x"]}).write_parquet(p)
    with pytest.raises(InputError, match="columns label are not numeric"):
        read_features(p)
    pl.DataFrame({"id": ["a", "b"], "f0": [1.0, None]}).write_parquet(p)
    with pytest.raises(InputError, match=r"NaN or infinite values on row 1 \(id 'b'\)"):
        read_features(p)


def test_align_rows(tmp_path):
    keys = {"id": ["x", "y", "z"], "path": ["p/x", "p/y", "p/z"]}

    def describe(i):
        return f"sample {i}"

    order, scheme = align_rows(
        tmp_path, np.array(["p/z", "p/x", "p/y"]), 3, keys, listing="L", describe=describe
    )
    assert scheme == "path" and order.tolist() == [1, 2, 0]
    order, scheme = align_rows(tmp_path, None, 3, keys, listing="L", describe=describe)
    assert scheme == "row order" and order.tolist() == [0, 1, 2]
    with pytest.raises(InputError) as err:
        align_rows(tmp_path, np.array(["x", "q"]), 2, keys, listing="L", describe=describe)
    assert err.value.problems[:2] == ["no features for sample 1", "no features for sample 2"]
    assert "1 feature ids are not in L (matched by id): 'q'" in err.value.problems[2]
