"""`hierconsole score EMB.npz`, run in-process through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from hierconsole.cli import main
from hierconsole.engine.geometry import Euclidean, Poincare
from hierconsole.engine.retrieval import evaluate
from hierconsole.present.json_output import JSON_SCHEMA, SCHEMA_KEY


def _labels(n: int, rng: np.random.Generator) -> np.ndarray:
    leaf_middle = np.arange(10) % 4
    middle_high = np.arange(4) % 2
    leaf = rng.integers(0, 10, n)
    return np.stack([leaf, leaf_middle[leaf], middle_high[leaf_middle[leaf]]], axis=1)


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "query": (rng.standard_normal((30, 6)) * 0.1).astype(np.float32),
        "gallery": (rng.standard_normal((80, 6)) * 0.1).astype(np.float32),
        "query_labels": _labels(30, rng),
        "gallery_labels": _labels(80, rng),
    }


def _write(tmp_path: Path, name: str = "emb.npz", **arrays) -> Path:
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


def _run_json(capsys, *argv: str) -> dict:
    assert main(["score", *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc.pop(SCHEMA_KEY) == JSON_SCHEMA  # the shape's version, then the levels
    return doc


def test_json_shape_and_values_micro(tmp_path, capsys):
    arrays = _arrays()
    out = _run_json(capsys, str(_write(tmp_path, **arrays)))
    assert list(out) == ["leaf", "middle", "high"]
    for level in out:
        assert list(out[level]) == ["mAP", "R@1", "R@5", "R@10", "R@20", "valid_queries"]
        assert isinstance(out[level]["valid_queries"], int)
    expected = evaluate(
        torch.from_numpy(arrays["query"]),
        torch.from_numpy(arrays["gallery"]),
        arrays["query_labels"],
        arrays["gallery_labels"],
        Euclidean(),
    ).aggregate("micro")
    assert out == expected


def test_json_macro_poincare_and_custom_ks(tmp_path, capsys):
    arrays = _arrays(1)
    path = _write(tmp_path, **arrays)
    out = _run_json(
        capsys, str(path), "--geometry", "poincare", "--curvature", "2", "--aggregate", "macro", "--ks", "1,3"
    )
    for level in out:
        assert list(out[level]) == ["mAP", "R@1", "R@3", "valid_queries", "groups"]
    expected = evaluate(
        torch.from_numpy(arrays["query"]),
        torch.from_numpy(arrays["gallery"]),
        arrays["query_labels"],
        arrays["gallery_labels"],
        Poincare(c=2.0),
        ks=(1, 3),
    ).aggregate("macro")
    assert out == expected
    # the geometry matters: Euclidean ranking of the same points gives other numbers
    assert _run_json(capsys, str(path), "--aggregate", "macro", "--ks", "1,3") != out


def test_level_without_valid_queries_is_null_in_json(tmp_path, capsys):
    arrays = _arrays(2)
    for name in ("query_labels", "gallery_labels"):  # every middle its own high: no strict high positive
        arrays[name][:, 2] = arrays[name][:, 1] + 100
    out = _run_json(capsys, str(_write(tmp_path, **arrays)))
    assert out["high"] == {
        "mAP": None,
        "R@1": None,
        "R@5": None,
        "R@10": None,
        "R@20": None,
        "valid_queries": 0,
    }
    assert out["leaf"]["valid_queries"] > 0 and out["middle"]["valid_queries"] > 0


def test_table_uses_level_names_when_present(tmp_path, capsys):
    arrays = _arrays(3)
    path = _write(tmp_path, level_names=np.array(["Class", "Genus", "Family"]), **arrays)
    assert main(["score", str(path), "--aggregate", "macro"]) == 0
    out = capsys.readouterr().out
    assert "Class" in out and "Genus (cross-class)" in out and "Family (cross-genus)" in out
    assert "groups" in out and "R@20" in out
    assert main(["score", str(_write(tmp_path, "plain.npz", **arrays))]) == 0
    assert "Middle (cross-leaf)" in capsys.readouterr().out


def _bad_cases(tmp_path: Path) -> list[tuple[Path, str]]:
    cases = []
    a = _arrays(4)

    def case(name: str, expected: str, **changes):
        arrays = {**a, **changes}
        cases.append(
            (_write(tmp_path, f"{name}.npz", **{k: v for k, v in arrays.items() if v is not None}), expected)
        )

    case("missing", "no array named 'gallery_labels'", gallery_labels=None)
    case("width", "'query' has width 6 but 'gallery' has width 5", gallery=a["gallery"][:, :5])
    nan_query = a["query"].copy()
    nan_query[[3, 7]] = np.nan
    case("nan", "NaN or infinite values in 2 rows (first: 3, 7)", query=nan_query)
    case("float-labels", "'query_labels' must hold integers", query_labels=a["query_labels"].astype(float))
    case("two-columns", "must be [N, 3]", gallery_labels=a["gallery_labels"][:, :2])
    case("rows", "'query_labels' has 29 rows but 'query' has 30", query_labels=a["query_labels"][:29])
    case(
        "reversed",
        "labels are not a tree",
        query_labels=a["query_labels"][:, ::-1],
        gallery_labels=a["gallery_labels"][:, ::-1],
    )
    case(
        "empty",
        "non-empty [N, D]",
        query=np.zeros((0, 6), np.float32),
        query_labels=np.zeros((0, 3), np.int64),
    )
    case("names", "'level_names' must be 3 strings", level_names=np.array(["a", "b"]))
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"this is not a zip archive at all")
    cases.append((junk, "cannot read the file as .npz"))
    single = tmp_path / "single.npz"
    with single.open("wb") as fh:
        np.save(fh, a["query"])
    cases.append((single, "single .npy array"))
    cases.append((tmp_path / "absent.npz", "does not exist"))
    return cases


def test_bad_files_exit_2_with_a_clear_message(tmp_path, capsys):
    for path, expected in _bad_cases(tmp_path):
        assert main(["score", str(path), "--json"]) == 2, path.name
        captured = capsys.readouterr()
        assert captured.out == ""
        err = " ".join(captured.err.split())  # rich wraps long lines
        assert expected in err, (path.name, err)
        assert "Traceback" not in err


def test_all_problems_are_reported_at_once(tmp_path, capsys):
    a = _arrays(5)
    bad_query = a["query"].copy()
    bad_query[0, 0] = np.inf
    path = _write(
        tmp_path,
        query=bad_query,
        gallery=a["gallery"],
        query_labels=a["query_labels"][:, :2],
        gallery_labels=a["gallery_labels"],
    )
    assert main(["score", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "NaN or infinite" in err and "must be [N, 3]" in err


@pytest.mark.parametrize(
    "argv",
    [["--ks", "0,5"], ["--ks", "a"], ["--ks", "5,5"], ["--curvature", "-1"], ["--geometry", "lorentz"]],
)
def test_bad_options_exit_2(tmp_path, argv):
    path = _write(tmp_path, **_arrays(6))
    with pytest.raises(SystemExit) as exc:
        main(["score", str(path), *argv])
    assert exc.value.code == 2


# -- any depth ------------------------------------------------------------------------------------------

FIVE = ("Species", "Genus", "Family", "Order", "Class")


def _five_level_labels(n: int, rng: np.random.Generator) -> np.ndarray:
    leaf = rng.integers(0, 24, n)
    return np.stack([leaf, leaf // 2, leaf // 4, leaf // 8, leaf // 16], axis=1)


def _five_level_arrays(seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "query": (rng.standard_normal((40, 6)) * 0.1).astype(np.float32),
        "gallery": (rng.standard_normal((150, 6)) * 0.1).astype(np.float32),
        "query_labels": _five_level_labels(40, rng),
        "gallery_labels": _five_level_labels(150, rng),
    }


def test_a_five_level_npz_is_scored_at_every_level(tmp_path, capsys):
    from hierconsole.levels import Levels

    arrays = _five_level_arrays()
    path = _write(tmp_path, level_names=np.array(FIVE), **arrays)
    out = _run_json(capsys, str(path), "--aggregate", "macro")
    assert list(out) == ["species", "genus", "family", "order", "class"]
    expected = evaluate(
        torch.from_numpy(arrays["query"]),
        torch.from_numpy(arrays["gallery"]),
        arrays["query_labels"],
        arrays["gallery_labels"],
        Euclidean(),
        levels=Levels.of(FIVE),
    ).aggregate("macro")
    for code, m in expected.items():
        assert out[code] == pytest.approx(m, nan_ok=True)
        assert out[code]["valid_queries"] > 0
    assert main(["score", str(path)]) == 0
    table = capsys.readouterr().out
    for shown in ("Species", "Genus (cross-species)", "Order (cross-family)", "Class (cross-order)"):
        assert shown in table
    # without names: the default names of five levels
    assert main(["score", str(_write(tmp_path, "plain.npz", **arrays))]) == 0
    assert "Level 5 (cross-level 4)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("broken-edge", "labels are not a tree: 1 level-3 labels have more than one level-4 label (first: 1)"),
        ("names", "'level_names' must be 5 strings (one per label column)"),
        ("thirteen", "must be [N, K] with one column per level, finest first (2 <= K <= 12"),
        ("one-dropped", "'query_labels' must be [N, 5] like the other labels"),
    ],
)
def test_bad_five_level_files_exit_2_naming_the_problem(tmp_path, capsys, change, expected):
    arrays = _five_level_arrays()
    if change == "broken-edge":  # family 1 under two orders: the check runs on every adjacent edge
        arrays["gallery_labels"] = arrays["gallery_labels"].copy()
        row = int(np.flatnonzero(arrays["gallery_labels"][:, 2] == 1)[0])
        arrays["gallery_labels"][row, 3] += 1
        arrays["gallery_labels"][row, 4] = arrays["gallery_labels"][row, 3] // 2
    elif change == "names":
        arrays["level_names"] = np.array(FIVE[:3])
    elif change == "thirteen":
        arrays["query_labels"] = np.repeat(arrays["query_labels"][:, :1], 13, axis=1)
        arrays["gallery_labels"] = np.repeat(arrays["gallery_labels"][:, :1], 13, axis=1)
    else:
        arrays["query_labels"] = arrays["query_labels"][:, :4]
    path = _write(tmp_path, f"{change}.npz", **arrays)
    assert main(["score", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert captured.out == "" and expected in err and "Traceback" not in err
    assert err.startswith("error: ")


# -- the hierarchical metrics of hierconsole.metrics ------------------------------------------------------


@pytest.mark.parametrize(("geometry", "aggregate"), [("euclidean", "micro"), ("poincare", "macro")])
def test_metrics_adds_the_tree_wide_metrics_equal_to_the_library(tmp_path, capsys, geometry, aggregate):
    from hierconsole.metrics import evaluate as library_evaluate
    from hierconsole.metrics.distances import Poincare as LibraryPoincare

    arrays = _five_level_arrays()
    path = _write(tmp_path, **arrays, level_names=np.array(FIVE))
    names = "H-AP,ASI,NDCG@10,mistake_severity@1,CPCC"
    out = _run_json(capsys, str(path), "--metrics", names, "--geometry", geometry, "--aggregate", aggregate, "--curvature", "1.5")
    assert list(out)[:5] == ["species", "genus", "family", "order", "class"] or len(out) == 6
    tree = out["hierarchy"]
    q, g = arrays["query"], arrays["gallery"]
    if geometry == "poincare":  # the library on the points the CLI projects onto the ball
        ball = Poincare(c=1.5)
        q, g = (ball.ball.projx(torch.from_numpy(a)).numpy() for a in (q, g))
    want = library_evaluate(
        q, g, arrays["query_labels"], arrays["gallery_labels"], metrics=names.split(","),
        geometry=LibraryPoincare(1.5) if geometry == "poincare" else "euclidean", aggregate=aggregate,
    )
    for name in names.split(","):
        assert tree[name] == pytest.approx(want.to_dict()["hierarchy"][name], abs=1e-12)
    assert tree["H-AP queries"] == want.defined()["hierarchy"]["H-AP"]
    # The table prints them too.
    assert main(["score", str(path), "--metrics", "H-AP,mistake_severity@1"]) == 0
    text = capsys.readouterr().out
    assert "the whole tree" in text and "H-AP" in text and "mistake_severity@1" in text


@pytest.mark.parametrize("value", ["H-AP,HAP", "NDCG@0", "", "ASI,ASI"])
def test_bad_metrics_exit_2_naming_it(tmp_path, capsys, value):
    path = _write(tmp_path, **_arrays(6))
    with pytest.raises(SystemExit) as exc:
        main(["score", str(path), "--metrics", value])
    assert exc.value.code == 2
    assert "--metrics" in capsys.readouterr().err
