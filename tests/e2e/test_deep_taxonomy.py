"""Trees of any depth end to end, as a user runs them: an iNaturalist-format file of seven ranks from
`import inat` to a finished study (audits, `export metrics`, the report, the effects screen at 80x24), and
the demo preset on a two-level and a twelve-level tree.

Every command is a real subprocess on a temporary home; the studies are tiny (two seeds, two epochs).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from hierconsole.study.db.storage import Store
from tests.deep_trees import INAT_RANKS, inat_rows, write_inat_json
from tests.e2e.tiny_study import TINY as TINY_STUDY
from tests.reliability.conftest import cli
from tests.tui.conftest import make_app, screen_text, settle

pytestmark = pytest.mark.slow

TINY = [*TINY_STUDY, "--set", "evaluation.baselines=[]"]
N_SPECIES = 60
DIM = 24
INAT_NAMES = ("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom")


def _hierarchical_features(rows: list[tuple[str, ...]], leaf_of: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Features that carry the tree: a random direction per node at every level, coarser levels stronger,
    plus noise, so a study has something to learn at each level."""
    x = rng.standard_normal((len(leaf_of), DIM)) * 0.6
    for level in range(len(rows[0])):
        names = sorted({r[level] for r in rows})
        direction = {n: rng.standard_normal(DIM) for n in names}
        scale = 0.5 + 0.25 * level
        x += scale * np.stack([direction[rows[leaf][level]] for leaf in leaf_of])
    return x.astype(np.float32)


@pytest.fixture(scope="module")
def inat_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A home with a seven-rank iNat import and a finished demo study on it."""
    root = tmp_path_factory.mktemp("inat7")
    rng = np.random.default_rng(7)
    rows = inat_rows(N_SPECIES, rng)
    train_leaf = np.repeat(np.arange(N_SPECIES), 6)
    test_leaf = np.repeat(np.arange(N_SPECIES), 2)
    train_ids = [10_000 + i for i in range(len(train_leaf))]
    test_ids = [90_000 + i for i in range(len(test_leaf))]
    write_inat_json(root / "train.json", rows, train_ids, train_leaf.tolist())
    write_inat_json(root / "val.json", rows, test_ids, test_leaf.tolist())
    x = _hierarchical_features(rows, np.concatenate([train_leaf, test_leaf]), rng)
    np.savez(root / "f.npz", features=x, ids=np.array([str(i) for i in train_ids + test_ids]))
    home = root / "home"
    done = cli(home, "import", "inat", str(root / "f.npz"), "--train", str(root / "train.json"),
               "--val", str(root / "val.json"), "--name", "inat7")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = cli(home, "run", "demo", "--dataset", "inat7", "--name", "deep7", *TINY, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(home, read_only=True) as store:
        (study_id,) = store.one("SELECT study_id FROM studies WHERE name = 'deep7'") or (None,)
    assert study_id
    return home, study_id


def test_a_seven_rank_inat_study_finishes_with_its_audits_passing(inat_home):
    home, study_id = inat_home
    done = cli(home, "audit", study_id)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [line.split()[1] for line in done.stdout.splitlines() if line[:1].isalpha() and len(line.split()) > 1]
    results = [r for r in results if r in ("pass", "fail", "warn")]
    assert len(results) >= 20 and set(results) == {"pass"}, done.stdout
    for check in ("hyperbolic_norms_in_ball", "update_budget", "qg_splits_identical"):
        assert check in done.stdout


def test_export_metrics_has_a_row_per_level(inat_home, tmp_path):
    home, study_id = inat_home
    out = tmp_path / "metrics.csv"
    done = cli(home, "export", "metrics", "--study", study_id, "--format", "csv", "-o", str(out))
    assert done.returncode == 0, done.stderr
    with out.open(newline="") as f:
        records = list(csv.DictReader(f))
    levels = {r["level"] for r in records}
    assert set(INAT_RANKS) <= levels, levels
    assert {r["metric"] for r in records if r["level"] == "kingdom"} >= {"mAP", "R@1"}
    # Valid queries are counted at every level of every Q/G perturbation, and every level has some.
    valid = [r for r in records if r["metric"] == "valid_queries"]
    assert {r["level"] for r in valid} == set(INAT_RANKS)
    assert all(float(r["value"]) > 0 for r in valid)


def test_effects_and_the_report_name_every_level(inat_home, tmp_path):
    home, study_id = inat_home
    done = cli(home, "effects", study_id, "--json")
    assert done.returncode == 0, done.stderr
    for code in (*INAT_RANKS, "hier"):
        assert f'"{code}_mAP"' in done.stdout, code
    report = tmp_path / "deep7.md"
    done = cli(home, "report", study_id, "-o", str(report), timeout=300)
    assert done.returncode == 0, done.stderr
    text = report.read_text(encoding="utf-8")
    for name in INAT_NAMES:
        assert name in text, name


async def test_the_effects_screen_of_seven_levels_fits_80x24(inat_home):
    home, study_id = inat_home
    with Store(home, read_only=True) as store:
        app = make_app(store, study=study_id)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            screen = app.screen
            assert screen.level_choices[0] == "hier"
            assert set(screen.level_choices) == {"hier", *INAT_RANKS}
            text = screen_text(app)
            assert "…" not in text
            await pilot.press("m")  # the level picker moves to the next level
            await settle(pilot, app)
            assert screen.selection.level == screen.level_choices[1]


@pytest.mark.parametrize("view", ["1", "2", "4", "5"])
async def test_every_view_of_a_seven_level_study_fits_80x24(inat_home, view):
    """Datasets, runs, audits and redistribution of the real seven-level study: no number is cut."""
    home, study_id = inat_home
    with Store(home, read_only=True) as store:
        app = make_app(store, study=study_id)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press(view)
            await settle(pilot, app)
            text = screen_text(app)
            assert "…" not in text, text
            if view == "5":  # the redistribution runs its levels down the rows (they scroll), leaf first
                assert text.index("species") < text.index("genus") < text.index("family"), text


@pytest.mark.parametrize(("dataset", "k"), [("synthetic:tree2", 2), ("synthetic:tree12", 12)])
def test_the_demo_preset_runs_on_two_and_twelve_levels(tmp_path, dataset, k):
    home = tmp_path / "home"
    done = cli(home, "run", "demo", "--dataset", dataset, *TINY, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(home, read_only=True) as store:
        (study_id,) = store.one("SELECT study_id FROM studies")
        levels = {r[0] for r in store.rows("SELECT DISTINCT level FROM metrics WHERE study_id = ?", [study_id])}
    assert len(levels - {"hier"}) == k, levels
    # Every level has its columns in the arm table (codes that share a paper code too: tree2's leaf, group).
    done = cli(home, "export", "arms", "--study", study_id, "-o", "-")
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split(",")
    assert {f"{code}_mAP_mean" for code in levels} <= set(header), header
    done = cli(home, "audit", study_id)
    assert done.returncode == 0, done.stdout + done.stderr
    done = cli(home, "effects", study_id)
    assert done.returncode == 0, done.stderr
    assert "hier" in done.stdout

