"""`hierconsole import|datasets|taxonomy` against a real store: clean imports, and failed ones that
leave the store exactly as it was."""

from __future__ import annotations

import numpy as np

from hierconsole.cli import main
from hierconsole.study.db.storage import Store


def run(home, capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["--home", str(home), *argv])
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), " ".join(err.split())


def snapshot(home) -> tuple[list, list[str]]:
    with Store(home) as store:
        rows = store.rows("SELECT dataset_id, sha256 FROM datasets ORDER BY 1")
        nodes = store.rows("SELECT count(*) FROM taxonomy_nodes")
    files = (
        sorted(str(p.relative_to(home)) for p in (home / "datasets").rglob("*"))
        if (home / "datasets").exists()
        else []
    )
    return rows + nodes, files


def test_cub_import_lists_and_summarises(tmp_path, capsys, cub):
    home = tmp_path / "home"
    code, out, err = run(home, capsys, "import", "cub", str(cub.root), str(cub.features), str(cub.taxonomy))
    assert code == 0, err
    assert "imported cub" in out and "4/3/2 Class/Genus/Family" in out
    code, out, _ = run(home, capsys, "datasets")
    assert code == 0 and "cub" in out and "Class/Genus/Family" in out
    code, out, _ = run(home, capsys, "taxonomy", "cub")
    assert code == 0 and "0 conflicts" in out and "genera" in out
    # Importing the same data again is a no-op; different data under the same name is refused.
    assert run(home, capsys, "import", "cub", str(cub.root), str(cub.features), str(cub.taxonomy))[0] == 0
    before = snapshot(home)
    x = np.load(cub.features)
    np.savez(cub.features, features=x["features"] * 2, ids=x["ids"])
    code, _, err = run(home, capsys, "import", "cub", str(cub.root), str(cub.features), str(cub.taxonomy))
    assert code == 2 and "already in the store" in err
    assert snapshot(home) == before


def test_nabirds_import(tmp_path, capsys, nabirds):
    home = tmp_path / "home"
    code, out, err = run(home, capsys, "import", "nabirds", str(nabirds.root), str(nabirds.features))
    assert code == 0, err
    assert "Leaf/Parent/Supergroup" in out


def test_failed_imports_change_nothing(tmp_path, capsys, cub):
    home = tmp_path / "home"
    assert run(home, capsys, "import", "synthetic", "demo")[0] == 0
    before = snapshot(home)
    x = np.load(cub.features)
    bad = x["features"].copy()
    bad[2, 1] = np.nan
    np.savez(cub.features, features=bad, ids=x["ids"])
    code, _, err = run(home, capsys, "import", "cub", str(cub.root), str(cub.features), str(cub.taxonomy))
    assert code == 2 and str(cub.features) in err and "NaN" in err
    assert snapshot(home) == before
    np.savez(cub.features, features=x["features"], ids=x["ids"])
    good = cub.lines("image_class_labels.txt")
    cub.set_lines("image_class_labels.txt", good[:-1] + ["bogus"])
    code, _, err = run(home, capsys, "import", "cub", str(cub.root), str(cub.features), str(cub.taxonomy))
    assert code == 2 and "image_class_labels.txt" in err
    assert snapshot(home) == before
    cub.set_lines("image_class_labels.txt", good)
    code, _, err = run(
        home,
        capsys,
        "import",
        "cub",
        str(cub.root),
        str(cub.features),
        str(cub.taxonomy),
        "--name",
        "bad name!",
    )
    assert code == 2 and "--name" in err
    assert snapshot(home) == before
