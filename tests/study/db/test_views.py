"""The SQL views are rendered from the Python definitions and compute what the Python analysis does."""

from __future__ import annotations

import pytest

from hierconsole.factorial import CONTRASTS
from hierconsole.levels import PAPER_CODES as LEVELS
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import views_sql
from hierconsole.study.read import per_seed
from hierconsole.vocabulary import ARMS, HIER_METRIC, HIER_SCORE, MAP, RANKING_METRICS
from tests.stores.fixed import COMPLETE


def test_the_views_are_rendered_from_the_vocabulary():
    sql = views_sql()
    assert "${" not in sql
    for name, contrast in CONTRASTS.items():
        assert f"('{name}', {contrast.sql()})" in sql
    assert "IN ('E_R', 'H_R', 'E_S', 'H_S')" in sql and list(ARMS) == ["E_R", "H_R", "E_S", "H_S"]
    assert "metric IN (" + ", ".join(f"'{m}'" for m in RANKING_METRICS) + ")" in sql


@pytest.mark.parametrize("level", [*LEVELS, HIER_SCORE])
def test_effects_summary_agrees_with_the_python_effects(fixed_home, level):
    column = HIER_METRIC if level == HIER_SCORE else f"{level}_{MAP}"
    with Store(fixed_home) as store:
        python = simple_effects(per_seed(store, COMPLETE), [column])[column]
        rows = store.rows(
            "SELECT effect, mean, sd, positive_seeds, n_seeds FROM effects_summary "
            "WHERE study_id = ? AND level = ? AND metric = ?",
            [COMPLETE, level, MAP],
        )
    assert sorted(effect for effect, *_ in rows) == sorted(python)
    for effect, mean, sd, positive, n in rows:
        e = python[effect]
        assert mean == pytest.approx(e.mean, abs=1e-12) and sd == pytest.approx(e.sd, abs=1e-12)
        assert (positive, n) == (e.positive, e.n)


def test_the_hier_level_of_the_views_is_the_hier_score(fixed_home):
    with Store(fixed_home) as store:
        table = per_seed(store, COMPLETE)
        sql = dict(
            ((arm, seed), value)
            for arm, seed, value in store.rows(
                "SELECT arm, seed, value FROM per_seed_metrics WHERE study_id = ? AND level = ? AND metric = ?",
                [COMPLETE, HIER_SCORE, MAP],
            )
        )
    python = {(r["arm"], r["seed"]): r[HIER_METRIC] for r in table.iter_rows(named=True)}
    assert sql.keys() == python.keys() and len(sql) == 12
    for key, value in python.items():
        assert sql[key] == pytest.approx(value, abs=1e-12)
