"""The store at any depth (schema version 7): a dataset's levels and taxonomy paths, a study's recorded level
plan, and the views' hier score and redistribution, checked against plain loops written here, for three levels
(the fixed store) and five (codes `order` and `class` are SQL keywords: no level code is a column name)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hierconsole.datasets import FeatureSet
from hierconsole.factorial import REDISTRIBUTION_CONTRASTS
from hierconsole.levels import LevelPlan, Levels
from hierconsole.study.db.catalog import (
    _insert_rows,
    dataset_levels,
    delete_dataset,
    get_dataset,
    study_levels,
)
from hierconsole.study.db.storage import Store, study_level_rows
from hierconsole.study.read.datasets import taxonomy_lines
from hierconsole.study.read.results import table_frame
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import HIER_SCORE, MAP, hier_score
from tests.stores.fixed import COMPLETE, add_tuning
from tests.tiny import tiny_preset

NAMES = ("Species", "Genus", "Family", "Order", "Class")
DEEP = "deep5"
STUDY = "deep5-study"
SEEDS = (1, 2, 3)
PERTURBATIONS = (7, 8)
ARMS = ("E_R", "H_R", "E_S", "H_S")


def deep_taxonomy() -> Taxonomy:
    nodes = (
        tuple(f"s{i}" for i in range(8)),
        tuple(f"g{i}" for i in range(4)),
        ("f0", "f1", "f2"),
        ("o0", "o1"),
        ("c0",),
    )
    parents = (np.array([0, 0, 1, 1, 2, 2, 3, 3]), np.array([0, 0, 1, 2]), np.array([0, 1, 1]), np.array([0, 0]))
    return Taxonomy(nodes, parents, NAMES)


def _value(arm: str, seed: int, position: int, perturbation: int) -> float | None:
    """H_S gains at the top and loses below it; H_R loses at the top too; no valid query at genus for seed 3."""
    if seed == 3 and position == 2:
        return None
    sign = 1.0 if position == len(NAMES) else -1.0
    gain = {"E_R": 0.0, "E_S": 0.0, "H_S": 0.013 * sign, "H_R": -0.007}[arm]
    return 0.5 - 0.0713 * position + 0.00317 * seed + 0.0011 * perturbation + gain + 0.0003 * (seed * position % 4)


@pytest.fixture(scope="module")
def deep_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a five-level dataset's rows (no folder: only the store is under test) and a scored study."""
    home = tmp_path_factory.mktemp("deep") / "home"
    n = 16
    fs = FeatureSet(
        DEEP, np.zeros((n, 4), np.float32), np.array([f"i{i}" for i in range(n)]), np.arange(n) % 8,
        np.arange(n) % 3, deep_taxonomy(), "generic",
    )  # fmt: skip
    with Store(home) as store:
        store.write(lambda con: _insert_rows(con, store.home, fs, home / "datasets" / DEEP))
        levels = dataset_levels(store, DEEP)
        store.execute(
            "INSERT INTO studies (study_id, name, dataset_id, preset, preset_sha256, phase) VALUES (?, ?, ?, ?, ?, ?)",
            [STUDY, STUDY, DEEP, tiny_preset().canonical_json(), "x", "complete"],
        )
        store.write(
            lambda con: con.executemany(
                "INSERT INTO study_levels VALUES (?, ?, ?, ?, ?)", study_level_rows(STUDY, LevelPlan.default(levels))
            )
        )
        rows = [
            [STUDY, f"{STUDY}/final-s{seed}/{arm}", seed, arm, pert, "micro", code, MAP, _value(arm, seed, i, pert), False]
            for seed in SEEDS
            for arm in ARMS
            for pert in PERTURBATIONS
            for i, code in enumerate(levels.codes, start=1)
        ]
        store.write(lambda con: con.executemany(f"INSERT INTO metrics VALUES ({', '.join('?' * 10)})", rows))
    return home


def test_a_five_level_dataset_reads_back_its_levels_and_nodes(deep_home):
    tax = deep_taxonomy()
    with Store(deep_home, read_only=True) as store:
        info = get_dataset(store, DEEP)
        assert info.levels == Levels(("species", "genus", "family", "order", "class"), NAMES) == tax.levels
        assert info.level_counts == (8, 4, 3, 2, 1) == tax.counts and info.n_leaf == 8
        paths = store.rows("SELECT leaf_index, path FROM taxonomy_nodes WHERE dataset_id = ? ORDER BY leaf_index", [DEEP])
        assert [(i, tuple(p)) for i, p in paths] == list(enumerate(tax.rows()))
        assert taxonomy_lines(store, DEEP) == tax.summary().lines()
        plan = study_levels(store, STUDY)
    assert plan == LevelPlan.default(tax.levels)
    assert plan.hier == ("genus", "family", "order", "class") and plan.trained == tax.levels.codes


def test_deleting_a_five_level_dataset_removes_its_level_rows(deep_home, tmp_path):
    fs = FeatureSet(
        "other", np.zeros((8, 2), np.float32), np.array([f"j{i}" for i in range(8)]), np.arange(8), np.arange(8) % 3,
        deep_taxonomy(), "generic",
    )  # fmt: skip
    with Store(tmp_path / "home") as store:
        (store.home / "datasets" / "other").mkdir(parents=True)
        store.write(lambda con: _insert_rows(con, store.home, fs, store.home / "datasets" / "other"))
        delete_dataset(store, "other")
        for table in ("datasets", "dataset_levels", "taxonomy_nodes"):
            assert store.value(f"SELECT count(*) FROM {table}") == 0, table


def _per_seed_levels(store: Store, study_id: str) -> dict[tuple[str, int], dict[str, float | None]]:
    maps: dict[tuple[str, int], dict[str, float | None]] = {}
    for arm, seed, level, value in store.rows(
        "SELECT arm, seed, level, value FROM per_seed_metrics WHERE study_id = ? AND metric = ? AND level <> ?",
        [study_id, MAP, HIER_SCORE],
    ):
        maps.setdefault((arm, seed), {})[level] = value
    return maps


@pytest.mark.parametrize("depth", [3, 5])
def test_the_views_hier_row_is_hier_score_of_their_level_rows(fixed_home, deep_home, depth):
    """The same float operations as vocabulary.hier_score (level order, one addition at a time, levels with
    no value left out): equal, not close."""
    home, study_id = (fixed_home, COMPLETE) if depth == 3 else (deep_home, STUDY)
    with Store(home, read_only=True) as store:
        hier = study_levels(store, study_id).hier
        assert len(hier) == depth - 1
        maps = _per_seed_levels(store, study_id)
        sql = {
            (arm, seed): value
            for arm, seed, value in store.rows(
                "SELECT arm, seed, value FROM per_seed_metrics WHERE study_id = ? AND level = ? AND metric = ?",
                [study_id, HIER_SCORE, MAP],
            )
        }
    assert sql.keys() == maps.keys() and len(sql) == 12
    for key, levels in maps.items():
        assert sql[key] == hier_score(levels, hier), key
    if depth == 5:  # seed 3 has no genus value: its hier is the mean of the other three, by a plain loop
        levels = maps[("H_S", 3)]
        assert levels["genus"] is None
        total = 0.0
        for code in ("family", "order", "class"):
            total += levels[code]  # type: ignore[operator]
        assert sql[("H_S", 3)] == total / 3


def test_redistribution_is_long_per_level_with_its_flag(deep_home):
    with Store(deep_home, read_only=True) as store:
        rows = store.dicts(
            "SELECT effect, position, level, mean, finer_down_highest_up FROM redistribution "
            "WHERE study_id = ? AND aggregation = 'micro' ORDER BY effect, position",
            [STUDY],
        )
        effects = store.rows(
            "SELECT effect, level, seed, value FROM effects_per_seed WHERE study_id = ? AND metric = ?", [STUDY, MAP]
        )
    assert sorted({r["effect"] for r in rows}) == sorted(REDISTRIBUTION_CONTRASTS)
    codes = ("species", "genus", "family", "order", "class")
    for effect in REDISTRIBUTION_CONTRASTS:
        mine = [r for r in rows if r["effect"] == effect]
        assert [(r["position"], r["level"]) for r in mine] == list(enumerate(codes, start=1))
        means = []
        for code in codes:
            values = [v for e, lv, _, v in effects if e == effect and lv == code]
            means.append(sum(values) / len(values))
        assert [r["mean"] for r in mine] == pytest.approx(means, abs=1e-12)
        flag = all(m < 0 for m in means[:-1]) and means[-1] > 0
        assert {r["finer_down_highest_up"] for r in mine} == {flag}
    # geom_S (H_S - E_S) loses at every finer level and gains at the top; geom_R (H_R - E_R) loses everywhere.
    assert {r["effect"]: r["finer_down_highest_up"] for r in rows} == {"geom_S": True, "geom_R": False}


def test_the_tuning_export_has_a_column_per_hier_level_in_order(deep_home, tmp_path):
    with Store(deep_home) as store:
        maps = {"genus": 0.4, "family": None, "order": 0.3, "class": 0.2}
        add_tuning(store, STUDY, "euclidean", 0.1, maps, 0.3, "winner")
        frame = table_frame(store, "tuning", STUDY)
    assert frame.columns == [
        "study_id", "geometry", "tau", "genus_mAP", "family_mAP", "order_mAP", "class_mAP", "score", "status"
    ]  # fmt: skip
    assert frame.row(0) == (STUDY, "euclidean", 0.1, 0.4, None, 0.3, 0.2, 0.3, "winner")


def test_study_levels_is_written_at_creation(fixed_home):
    with Store(fixed_home, read_only=True) as store:
        rows = store.rows("SELECT study_id, position, code, trained, in_hier FROM study_levels ORDER BY ALL")
        recorded = json.loads(store.value("SELECT preset FROM studies WHERE study_id = ?", [COMPLETE]))
    assert recorded  # the plan is the preset's resolved over the dataset's levels (the default for these)
    assert [r[1:] for r in rows if r[0] == COMPLETE] == [
        (1, "leaf", True, False), (2, "middle", True, True), (3, "high", True, True)
    ]  # fmt: skip
