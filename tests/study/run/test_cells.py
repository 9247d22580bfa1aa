"""Studies that train a subset of the four cells: planning, lockstep, audits and effects on what exists."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

from hierconsole.errors import ConfigError, InputError
from hierconsole.study.analysis.effects import omitted_effects, simple_effects
from hierconsole.study.analysis.redistribution import redistribution
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read import evaluated_per_seed, per_seed
from hierconsole.study.read.audits import stored_audits
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from tests.tiny import tiny_preset


def test_cells_are_validated_and_kept_in_paper_order():
    p = tiny_preset(**{"training.cells": ["H_S", "E_R"]})
    assert p.cells == ("E_R", "H_S")
    assert tiny_preset().cells == ("E_R", "H_R", "E_S", "H_S")
    with pytest.raises(ConfigError, match=r"training.cells = .*item 0 = \"X_S\""):
        tiny_preset(**{"training.cells": ["X_S"]})
    with pytest.raises(ConfigError, match="repeats"):
        tiny_preset(**{"training.cells": ["E_S", "E_S"]})


def test_tuning_only_for_geometries_with_a_supcon_cell():
    p = tiny_preset(**{"training.cells": ["E_R", "E_S"], "temperature.poincare": "tune"})
    assert p.tuned_geometries == ()
    p = tiny_preset(**{"training.cells": ["H_S"], "temperature.poincare": "tune"})
    assert p.tuned_geometries == ("poincare",)


def _table(arms, seeds=(1, 2, 3)) -> pl.DataFrame:
    rows = [
        {"arm": a, "seed": s, "m": 0.1 * i + 0.01 * s * (i + 1)} for i, a in enumerate(arms) for s in seeds
    ]
    return pl.DataFrame(rows)


def test_effects_on_a_subset_omit_what_needs_a_missing_arm():
    table = _table(["E_R", "H_R"])
    effects = simple_effects(table, "m")
    assert list(effects["m"]) == ["geom_R"]
    e = effects["m"]["geom_R"]
    by = {(r["arm"], r["seed"]): r["m"] for r in table.iter_rows(named=True)}
    assert e.per_unit == {s: by[("H_R", s)] - by[("E_R", s)] for s in (1, 2, 3)}
    assert omitted_effects(["E_R", "H_R"]) == {
        "geom_S": ("E_S", "H_S"),
        "loss_E": ("E_S",),
        "loss_H": ("H_S",),
        "interaction": ("E_S", "H_S"),
    }
    assert simple_effects(_table(["E_S"]), "m") == {"m": {}}
    # A seed lacking an arm the others have is still an error: the pairing would break.
    ragged = pl.concat([_table(["E_R", "H_R"]), _table(["E_S"], seeds=(1,))])
    with pytest.raises(InputError, match="seed 2 lacks arm"):
        simple_effects(ragged, "m")


def test_redistribution_needs_one_contrast():
    rows = [
        {"arm": a, "seed": s, "leaf_mAP": 0.5 + s * 0.01, "middle_mAP": 0.3, "high_mAP": 0.2 + (a == "H_S") * 0.1}
        for a in ("E_S", "H_S")
        for s in (1, 2)
    ]
    result = redistribution(pl.DataFrame(rows))
    assert list(result.contrasts) == ["geom_S"]
    with pytest.raises(InputError, match="redistribution needs"):
        redistribution(pl.DataFrame([{**r, "arm": "E_S"} for r in rows if r["arm"] == "E_S"]))


@pytest.fixture(scope="module")
def single_arm(tmp_path_factory, tiny_fs):
    home = tmp_path_factory.mktemp("home")
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, tiny_preset(**{"training.cells": ["E_S"]}), "tiny")
        Orchestrator(store, max_parallel=2).run_until_idle()
    return home, study_id


@pytest.mark.slow
def test_a_single_arm_study_trains_one_cell_and_passes_its_audits(single_arm):
    home, study_id = single_arm
    with Store(home) as store:
        assert get_study(store, study_id).phase == "complete"
        runs = store.rows("SELECT DISTINCT arm FROM runs WHERE study_id = ? AND kind = 'final'", [study_id])
        assert runs == [("E_S",)]
        checks = stored_audits(store, study_id)
        assert all(c.ok for c in checks), [c for c in checks if not c.ok]
        ball = next(c for c in checks if c.name == "hyperbolic_norms_in_ball")
        assert "no hyperbolic (Poincaré-ball) cell" in ball.evidence
        assert per_seed(store, study_id)["arm"].unique().to_list() == ["E_S"]
        scored = evaluated_per_seed(store, study_id)
        assert scored is not None and sorted(scored["seed"].to_list()) == [42, 2024]
        assert store.rows("SELECT count(*) FROM effects_summary WHERE study_id = ?", [study_id]) == [(0,)]


@pytest.mark.slow
def test_effects_command_says_what_it_omits(single_arm):
    home, study_id = single_arm
    out = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), "effects", study_id, "--metric", "hier_mAP"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "not computed, the study trains only E_S" in " ".join(out.stdout.split())
    assert "geom_R (H_R - E_R) needs E_R, H_R" in " ".join(out.stdout.split())


def test_selection_options_are_checked():
    with pytest.raises(ConfigError, match="exceed training.epochs"):
        tiny_preset(epochs=3, **{"training.select_epoch": True, "training.selection_epochs": [2, 5]})
    with pytest.raises(ConfigError, match="only used with training.select_epoch"):
        tiny_preset(**{"training.selection_score": "leaf_mAP"})
    with pytest.raises(ConfigError, match="needs candidate epochs"):
        tiny_preset(**{"training.select_epoch": True, "training.val_every": 0})
