"""`effects --aggregate` and `export ... --aggregate` over a real study re-scored post hoc: the numbers
against a hand computation from the exported metric rows, always labelled post-hoc, the registered
endpoint unchanged, and one exit-2 line while no re-score exists."""

from __future__ import annotations

import json
import statistics

import polars as pl
import pytest

from hierconsole.study.db.storage import Store
from hierconsole.styles import EFFECT_DIGITS
from hierconsole.vocabulary import POSTHOC_NOTE
from tests.homes import copy_home
from tests.stores.real import cli

pytestmark = pytest.mark.slow  # worker processes

CELLS = ("E_R", "H_R", "E_S", "H_S")
SEEDS = (42, 2024)


@pytest.fixture(scope="module")
def study(tmp_path_factory, trained_plain):
    # The session's plain study (tests/homes.py: the tiny demo, seeds SEEDS), rescored in this module's copy.
    home = copy_home(trained_plain.home, tmp_path_factory.mktemp("posthoc") / "home")
    study_id = trained_plain.study_id
    before = _effects_json(home, study_id)
    refused = cli(home, "effects", study_id, "--aggregate", "macro")
    done = cli(home, "rescore", study_id, "--aggregate", "macro", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return home, study_id, before, refused


def _effects_json(home, study_id: str, *extra: str) -> dict:
    done = cli(home, "effects", study_id, "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _hand_effects(home, tmp_path, study_id: str, aggregation: str) -> dict[str, dict[str, dict[int, float]]]:
    """metric -> effect -> seed -> value, by hand from `export metrics`: one aggregation's rows of the
    cells, each (seed, arm, level) averaged over its Q/G perturbations, hier = mean of middle and high
    mAP, then the paired differences of the factorial (paper Eq. 12-13)."""
    target = tmp_path / f"metrics-{aggregation}.csv"
    done = cli(home, "export", "metrics", "--study", study_id, "-o", str(target))
    assert done.returncode == 0, done.stderr
    rows = [
        r
        for r in pl.read_csv(target).iter_rows(named=True)
        if r["aggregation"] == aggregation and r["arm"] in CELLS and r["metric"] == "mAP"
    ]
    assert rows and {r["posthoc"] for r in rows} == {aggregation == "macro"}
    values: dict[tuple[int, str, str], list[float]] = {}
    for r in sorted(rows, key=lambda r: r["perturbation"]):
        values.setdefault((r["seed"], r["arm"], r["level"]), []).append(r["value"])
    assert {len(v) for v in values.values()} == {3}  # three Q/G perturbations per seed
    mean = {k: statistics.fmean(v) for k, v in values.items()}
    arm = {
        "middle_mAP": lambda s, a: mean[s, a, "middle"],
        "hier_mAP": lambda s, a: (mean[s, a, "middle"] + mean[s, a, "high"]) / 2,
    }
    out: dict[str, dict[str, dict[int, float]]] = {}
    for metric, v in arm.items():
        out[metric] = {
            "geom_R": {s: v(s, "H_R") - v(s, "E_R") for s in SEEDS},
            "geom_S": {s: v(s, "H_S") - v(s, "E_S") for s in SEEDS},
            "loss_E": {s: v(s, "E_S") - v(s, "E_R") for s in SEEDS},
            "loss_H": {s: v(s, "H_S") - v(s, "H_R") for s in SEEDS},
            "interaction": {s: (v(s, "H_S") - v(s, "E_S")) - (v(s, "H_R") - v(s, "E_R")) for s in SEEDS},
        }
    return out


def test_without_a_rescore_the_posthoc_view_is_refused_in_one_line(study):
    _, study_id, _, refused = study
    assert refused.returncode == 2 and not refused.stdout
    lines = refused.stderr.strip().splitlines()
    assert "Traceback" not in refused.stderr and len(lines) == 2
    assert f"study {study_id} has no macro re-score" in lines[0]
    assert f"hierconsole rescore {study_id} --aggregate macro" in lines[1]


def test_posthoc_effects_equal_a_hand_computation_and_are_labelled(study, tmp_path):
    home, study_id, _, _ = study
    doc = _effects_json(home, study_id, "--aggregate", "macro")
    assert doc["aggregation"] == "macro (post-hoc)" and "macro (post-hoc)" in doc["source"]
    hand = _hand_effects(home, tmp_path, study_id, "macro")
    for metric, effects in hand.items():
        for name, by_seed in effects.items():
            shown = doc["effects"][metric][name]
            for seed, value in by_seed.items():
                assert shown["per_seed"][str(seed)] == pytest.approx(value, abs=1e-12)
            assert shown["mean"] == pytest.approx(statistics.fmean(by_seed.values()), abs=1e-12)
            assert shown["sd"] == pytest.approx(statistics.stdev(by_seed.values()), abs=1e-12)
    # The macro numbers are other numbers than the registered ones (else the test could not tell them apart).
    micro = _effects_json(home, study_id)
    assert micro["effects"]["hier_mAP"]["geom_R"]["mean"] != doc["effects"]["hier_mAP"]["geom_R"]["mean"]
    text = cli(home, "effects", study_id, "--aggregate", "macro", "--metric", "hier_mAP", columns=200)
    assert text.returncode == 0, text.stderr
    flat = " ".join(text.stdout.split())
    assert f"aggregation macro (post-hoc): {POSTHOC_NOTE}" in flat and "macro (post-hoc))" in flat


def test_the_registered_effects_are_unchanged_by_the_rescore(study, tmp_path):
    home, study_id, before, _ = study
    after = _effects_json(home, study_id)
    assert after == before and after["aggregation"] == "micro"
    assert _effects_json(home, study_id, "--aggregate", "micro") == before  # the registered one, by name
    hand = _hand_effects(home, tmp_path, study_id, "micro")
    for metric, effects in hand.items():
        for name, by_seed in effects.items():
            for seed, value in by_seed.items():
                assert after["effects"][metric][name]["per_seed"][str(seed)] == pytest.approx(value, abs=1e-12)


def test_export_of_a_posthoc_table_leads_with_its_label(study, tmp_path):
    home, study_id, _, _ = study
    doc = _effects_json(home, study_id, "--aggregate", "macro")
    target = tmp_path / "effects-macro.csv"
    done = cli(home, "export", "effects", "--study", study_id, "--aggregate", "macro", "-o", str(target))
    assert done.returncode == 0, done.stderr
    frame = pl.read_csv(target)
    assert frame.columns[0] == "aggregation" and set(frame["aggregation"]) == {"macro (post-hoc)"}
    for row in frame.filter(pl.col("metric") == "hier_mAP").iter_rows(named=True):
        assert row["mean"] == pytest.approx(doc["effects"]["hier_mAP"][row["effect"]]["mean"], abs=1e-12)
    registered = tmp_path / "effects.csv"
    assert cli(home, "export", "effects", "--study", study_id, "-o", str(registered)).returncode == 0
    assert "aggregation" not in pl.read_csv(registered).columns
    for table in ("arms", "variance"):
        out = tmp_path / f"{table}-macro.csv"
        done = cli(home, "export", table, "--study", study_id, "--aggregate", "macro", "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert set(pl.read_csv(out)["aggregation"]) == {"macro (post-hoc)"}
    # A raw table holds every aggregation already: --aggregate is refused in one line, nothing written.
    raw = tmp_path / "runs.csv"
    done = cli(home, "export", "runs", "--study", study_id, "--aggregate", "macro", "-o", str(raw))
    assert done.returncode == 2 and "--aggregate applies to" in done.stderr and not raw.exists()


async def test_the_console_switches_to_the_posthoc_effects_with_a(study, tmp_path):
    from tests.tui.conftest import make_app, settle, shown

    home, study_id, _, _ = study
    hand = _hand_effects(home, tmp_path, study_id, "macro")["hier_mAP"]
    registered = _hand_effects(home, tmp_path, study_id, "micro")["hier_mAP"]

    def mean_sd(by_seed: dict[int, float]) -> str:
        d = EFFECT_DIGITS
        return f"{statistics.fmean(by_seed.values()):+.{d}f} ± {statistics.stdev(by_seed.values()):.{d}f}"

    with Store(home, read_only=True) as store:
        app = make_app(store, study=study_id)
        async with app.run_test(size=(120, 48)) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            text = shown(app)
            assert "aggregation micro of micro/macro" in text and "post-hoc" not in text
            assert mean_sd(registered["loss_E"]) in text
            await pilot.press("a")
            await settle(pilot, app)
            text = shown(app)
            assert "aggregation macro (post-hoc)" in text
            assert all(mean_sd(by_seed) in text for by_seed in hand.values())
            await pilot.press("a")  # and back to the registered endpoint
            await settle(pilot, app)
            assert mean_sd(registered["loss_E"]) in shown(app)
