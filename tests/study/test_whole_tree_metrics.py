"""A study that declares `evaluation.metrics` (the whole tree's metrics of hierconsole.metrics), trained for
real: its scoring job stores each metric for every run and Q/G perturbation, equal to the library on the
job's own embeddings; `effects --json`, the report and the console's Effects view show their effects."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from hierconsole.cli import main
from hierconsole.contract import layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.engine.geometry import EVAL_CLIP, make_geometry
from hierconsole.engine.trainer import cell_geometry, load_indices
from hierconsole.levels import WHOLE_TREE
from hierconsole.locations import job_dir
from hierconsole.metrics import evaluate
from hierconsole.study.db.storage import Store
from tests.homes import TrainedStudy, train_study
from tests.tiny import TINY_VALUES
from tests.tui.conftest import make_app, settle, shown

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("whole-tree")]  # one trained home for the module

NAMES = ["H-AP", "ASI", "NDCG@5", "mistake_severity@1", "CPCC"]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> TrainedStudy:
    values = {**TINY_VALUES, "evaluation.metrics": NAMES, "evaluation.baselines": ["frozen"]}
    return train_study(tmp_path_factory.mktemp("whole-tree") / "home", tiny_fs, values)


def _stored(study: TrainedStudy) -> dict[tuple[str, int, str], float]:
    with Store(study.home, read_only=True) as store:
        rows = store.rows(
            "SELECT run_id, perturbation, metric, value FROM metrics WHERE study_id = ? AND level = ?",
            [study.study_id, WHOLE_TREE],
        )
    return {(r, p, m): v for r, p, m, v in rows}


def test_each_run_and_draw_stores_the_librarys_values_on_its_own_embeddings(study):
    stored = _stored(study)
    with Store(study.home, read_only=True) as store:
        (job_id,) = store.one("SELECT job_id FROM jobs WHERE study_id = ? AND kind = 'evaluate'", [study.study_id])
    folder = job_dir(study.home, job_id)
    spec = JobSpec.read(layout.spec_path(folder)).resolved(study.home)
    fs = FeatureSet.load(spec.dataset_dir)
    test_idx = np.load(folder / layout.EMBEDDINGS / "test_idx.npy")
    labels = fs.labels[test_idx]
    p = spec.preset
    scored = [(m.run_id, m.embeddings_name, cell_geometry(m.cell, p.geometry.poincare, p.baselines.hier)) for m in spec.models]
    scored += [(b.run_id, b.embeddings_name, make_geometry("euclidean")) for b in spec.baselines]
    assert len(scored) == 4 * 2 + 1  # four cells of two seeds, and the frozen baseline
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the evaluator scores (a product's last bits follow its thread count)
    try:
        _check_runs(stored, folder, spec, scored, test_idx, labels)
    finally:
        torch.set_num_threads(threads)


def _check_runs(stored, folder, spec, scored, test_idx, labels) -> None:
    checked = 0
    for run_id, name, geometry in scored:
        z = np.load(folder / layout.EMBEDDINGS / name)
        for split in spec.test_splits:
            parts = load_indices(split.path)
            q, g = (np.searchsorted(test_idx, parts[k]) for k in ("query", "gallery"))

            def distances(x, y, geometry=geometry):
                return geometry.pairwise(torch.from_numpy(x), torch.from_numpy(y), clip_max=EVAL_CLIP).numpy()

            want = evaluate(z[q], z[g], labels[q], labels[g], metrics=NAMES, geometry=distances, workers=1).to_dict()
            for metric in NAMES:
                value = stored[(run_id, split.seed, metric)]
                expected = want["hierarchy"][metric]
                assert (value is None and math.isnan(expected)) or value == expected, (run_id, split.seed, metric)
                checked += 1
    assert checked == len(scored) * len(spec.test_splits) * len(NAMES) == len(stored)


def test_effects_json_reports_their_effects_paired_by_seed(study, capsys):
    assert main(["--home", str(study.home), "effects", study.study_id, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    stored = _stored(study)
    with Store(study.home, read_only=True) as store:
        runs = dict(store.rows("SELECT run_id, arm || ':' || seed FROM runs WHERE study_id = ?", [study.study_id]))
    for metric in NAMES:
        per_cell: dict[str, list[float]] = {}
        for (run_id, _, m), v in stored.items():
            if m == metric and run_id in runs:
                per_cell.setdefault(runs[run_id], []).append(v)
        if any(v is None for vs in per_cell.values() for v in vs):
            assert metric not in doc["effects"]  # undefined somewhere: left out, the others still shown
            continue
        mean = {key: sum(vs) / len(vs) for key, vs in per_cell.items()}  # each seed's draws averaged
        geom_r = [mean[f"H_R:{s}"] - mean[f"E_R:{s}"] for s in (42, 2024)]
        assert doc["effects"][metric]["geom_R"]["mean"] == pytest.approx(sum(geom_r) / 2, abs=1e-12)
        arms = {r["arm"] for r in doc["arms"] if r["metric"] == metric}
        assert arms == {"E_R", "H_R", "E_S", "H_S", "frozen"}


def test_the_report_has_their_tables(study, tmp_path):
    out = tmp_path / "report.md"
    assert main(["--home", str(study.home), "report", study.study_id, "-o", str(out)]) == 0
    text = out.read_text()
    assert "The whole tree's metrics (evaluation.metrics) per arm" in text
    assert "The whole tree's metrics (evaluation.metrics): simple effects" in text
    assert "| H-AP | geom_R | H_R - E_R |" in text


async def test_the_console_effects_view_cycles_on_to_them(study):
    with Store(study.home, read_only=True) as store:
        app = make_app(store, study=study.study_id)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            for _ in range(5):  # mAP, R@1, R@5, R@10, R@20, then the whole tree's
                await pilot.press("k")
                await settle(pilot, app)
            assert app.screen.selection.metric == "ASI"  # the first of the per-seed table's (by name)
            text = shown(app)
            assert "metric ASI" in text and "geom_R" in text
            await pilot.press("m")  # no level to cycle: it says so
            await settle(pilot, app)
            assert app.screen.selection.metric == "ASI"
