"""Any factorial end to end, as a user runs it: a 3 × 3 study (Euclidean, Poincaré, Lorentz × regression,
Taxonomy-SupCon, soft-label cross-entropy) from `run` to its audits and effects, and an objective of one's own from a
file in a temporary folder; a broken one is refused before anything is created.

Every command is a real subprocess on a temporary home; the studies are tiny (two seeds, two epochs).
"""

from __future__ import annotations

import csv
import json
import os
import statistics
from collections import defaultdict
from pathlib import Path

import pytest
from textual.widgets import Select

from hierconsole.study.db.storage import Store
from hierconsole.study.read.audits import CHECKS
from hierconsole.tui.messages import StudyLaunched
from hierconsole.tui.screens.launch import LaunchDialog
from tests.e2e.tiny_study import TINY
from tests.reliability.conftest import cli, one_line_error
from tests.test_registry import installed_components
from tests.tui.conftest import make_app, screen_text, settle, shown
from tests.tui.test_flow import wait_for

pytestmark = pytest.mark.slow

THREE_BY_THREE = [
    "--set", 'factorial.geometries=["euclidean","poincare","lorentz"]',
    "--set", 'factorial.losses=["regression","supcon","soft_ce"]',
    "--set", "temperature.others=0.2",
]  # fmt: skip

# The README's objective of one's own, as a user writes it (kept in step with the README by a test below).
OWN_OBJECTIVE = '''\
"""my_objectives.py: a contrastive margin loss on leaf labels, as a hierconsole objective."""
import torch


class LeafMargin:
    """Same-leaf pairs pulled together, all others pushed beyond a margin (Hadsell et al., 2006)."""

    uses_tau = False  # no temperature: hierconsole passes tau=None
    margin = 0.5

    def loss(self, dist, labels, *, tau, training):
        # dist: [C, B, B] within-batch distances of C cells; labels: [B, K], leaf first.
        leaf = labels[:, :1]
        same = leaf == leaf.T
        other = ~torch.eye(len(labels), dtype=torch.bool, device=dist.device)
        pos = (same & other).to(dist.dtype)
        neg = (~same).to(dist.dtype)
        pull = (dist**2 * pos).sum((-2, -1)) / pos.sum().clamp_min(1)
        push = (torch.relu(self.margin - dist) ** 2 * neg).sum((-2, -1)) / neg.sum().clamp_min(1)
        return pull + push  # [C]: one loss per cell
'''


def _study_of(home: Path, name: str) -> str:
    with Store(home, read_only=True) as store:
        row = store.one("SELECT study_id FROM studies WHERE name = ?", [name])
    assert row is not None
    return row[0]


def _audit_results(home: Path, study_id: str) -> set[str]:
    done = cli(home, "audit", study_id)
    assert done.returncode == 0, done.stdout + done.stderr
    words = [line.split()[1] for line in done.stdout.splitlines() if line[:1].isalpha() and len(line.split()) > 1]
    return {w for w in words if w in ("pass", "fail", "warn")}


def _recomputed_hier(home: Path, study_id: str, tmp_path: Path) -> dict[str, dict[int, float]]:
    """arm -> seed -> hier mAP, from `export metrics`: each level's mAP averaged over the Q/G perturbations,
    then the mean of the non-leaf levels."""
    out = tmp_path / f"{study_id.split('-')[0]}-metrics.csv"
    done = cli(home, "export", "metrics", "--study", study_id, "--format", "csv", "-o", str(out))
    assert done.returncode == 0, done.stderr
    values: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    with out.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["metric"] == "mAP" and int(r["seed"]) >= 0:
                values[(r["arm"], int(r["seed"]), r["level"])].append(float(r["value"]))
    hier: dict[str, dict[int, float]] = defaultdict(dict)
    for arm, seed in {(a, s) for a, s, _ in values}:
        hier[arm][seed] = statistics.fmean([statistics.fmean(values[(arm, seed, lv)]) for lv in ("middle", "high")])
    return hier


def _effects(home: Path, study_id: str) -> dict:
    done = cli(home, "effects", study_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["effects"]["hier_mAP"]


def _check_against_export(effects: dict, hier: dict[str, dict[int, float]]) -> None:
    for name, e in effects.items():
        definition = e["definition"]
        if definition.startswith("mean("):
            terms = [t.split(" - ") for t in definition[5:-1].split(", ")]
            for seed, value in e["per_seed"].items():
                s = int(seed)
                want = sum(hier[p][s] - hier[m][s] for p, m in terms) / len(terms)
                assert value == pytest.approx(want, abs=1e-9), name
        elif not definition.startswith("("):
            plus, minus = definition.split(" - ")
            for seed, value in e["per_seed"].items():
                assert value == pytest.approx(hier[plus][int(seed)] - hier[minus][int(seed)], abs=1e-9), name


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A home with a finished 3 × 3 study."""
    home = tmp_path_factory.mktemp("three") / "home"
    done = cli(home, "run", "demo", "--name", "three", *TINY, *THREE_BY_THREE, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return home, _study_of(home, "three")


def test_a_three_by_three_study_passes_its_audits_and_its_effects_are_the_exported_metrics(three, tmp_path):
    home, study_id = three
    assert _audit_results(home, study_id) == {"pass"}
    effects = _effects(home, study_id)
    hier = _recomputed_hier(home, study_id, tmp_path)
    assert set(hier) == {f"{g}_{o}" for g in "EHL" for o in "RSC"}
    assert len(effects) == 9 + 9 + 9 + 3 + 3
    assert effects["geom_S:L-E"]["definition"] == "L_S - E_S"
    assert effects["loss:C-S"]["definition"] == "mean(E_C - E_S, H_C - H_S, L_C - L_S)"
    _check_against_export(effects, hier)
    # Soft-label CE's leaf prototypes are counted apart: every projector the same size, the audit saying
    # what the objective adds (one prototype of the demo's out_dim per leaf).
    with Store(home, read_only=True) as store:
        counts = store.rows(
            "SELECT loss, min(trainable_params), max(trainable_params), list(DISTINCT objective_params) FROM runs "
            "WHERE study_id = ? AND kind = 'final' GROUP BY loss ORDER BY loss", [study_id]
        )
        leaves, out_dim = store.value("SELECT n_leaf FROM datasets"), json.loads(
            store.value("SELECT preset FROM studies WHERE study_id = ?", [study_id])
        )["training"]["out_dim"]
    assert len({c[1] for c in counts} | {c[2] for c in counts}) == 1
    assert {loss: added for loss, _, _, added in counts} == {"regression": [0], "soft_ce": [leaves * out_dim], "supcon": [0]}
    shown = " ".join(cli(home, "effects", study_id).stdout.split())
    assert "L = Lorentz (hyperboloid) geometry; R = regression, S = Taxonomy-SupCon, C = soft-label CE loss" in shown
    audit = cli(home, "audit", study_id)
    assert f"objectives add parameters of their own, not compared: soft_ce {leaves * out_dim:,}" in " ".join(audit.stdout.split())


def test_an_objective_of_ones_own_runs_end_to_end_and_a_broken_one_is_refused(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "my_objectives.py").write_text(OWN_OBJECTIVE)
    (folder / "broken.py").write_text("class NoLoss:\n    uses_tau = False\n")
    home = tmp_path / "home"
    own = ["--set", 'factorial.losses=["regression","my_objectives:LeafMargin"]']
    done = cli(home, "run", "demo", "--name", "own", *TINY, *own, timeout=600, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    study_id = _study_of(home, "own")
    assert _audit_results(home, study_id) == {"pass"}
    effects = _effects(home, study_id)
    assert effects["loss_E"]["definition"] == "E_LeafMargin - E_R"
    _check_against_export(effects, _recomputed_hier(home, study_id, tmp_path))
    # The study keeps the source it trained, by name and hash, inside the (relocatable) home.
    manifest = json.loads((home / "studies" / study_id / "components" / "manifest.json").read_text())
    assert list(manifest) == ["my_objectives:LeafMargin"]
    assert manifest["my_objectives:LeafMargin"]["file"] == "my_objectives.py"

    before = sorted(p.relative_to(home) for p in home.rglob("*") if "studies" in p.parts)
    broken = ["--set", 'factorial.losses=["regression","broken:NoLoss"]']
    text = one_line_error(cli(home, "run", "demo", "--name", "broken", *TINY, *broken, cwd=folder))
    assert "objective 'broken:NoLoss' lacks loss" in text
    missing = ["--set", 'factorial.losses=["regression","nowhere:Thing"]']
    text = one_line_error(cli(home, "run", "demo", "--name", "broken", *TINY, *missing, cwd=folder))
    assert "cannot import module 'nowhere'" in text
    assert sorted(p.relative_to(home) for p in home.rglob("*") if "studies" in p.parts) == before


def test_the_readme_shows_this_objective():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    body = OWN_OBJECTIVE.split("import torch", 1)[1]
    assert body.strip() in readme


async def test_the_console_shows_a_three_by_three_at_80x24_with_no_number_cut(three):
    home, study_id = three
    with Store(home, read_only=True) as store:
        app = make_app(store, study=study_id)
        async with app.run_test(size=(80, 24)) as pilot:
            for view in ("3", "5", "2"):
                await pilot.press(view)
                await settle(pilot, app)
                text = screen_text(app)
                assert "…" not in text, (view, text)
            assert "L_C" in text or "left out at this width" in text  # the runs view names what it leaves out
            await pilot.press("3")
            await settle(pilot, app)
            assert "L_R" in screen_text(app)


async def test_a_three_by_three_launched_from_the_console_runs_and_passes_its_audits(fixed_copy):
    """The console's launch dialog takes the factorial as `--set` overrides, as the command line does; the
    console drives the study to its end and shows its audits and its effects."""
    messages: list = []
    overrides = " ".join(
        THREE_BY_THREE[1::2] + [a for a in TINY[4:] if a != "--set"] + ["evaluation.n_query=20", "compute.device='cpu'"]
    )
    with Store(fixed_copy) as store:
        app = make_app(store, orchestrate=True, tick_interval=0.2)
        async with app.run_test(size=(100, 40), message_hook=messages.append) as pilot:
            await settle(pilot, app)
            await pilot.press("l")
            await settle(pilot, app)
            dialog = app.screen
            assert isinstance(dialog, LaunchDialog)
            dialog.query_one("#dataset", Select).value = "tiny"
            dialog.query_one("#seeds").value = "42,2024"
            dialog.query_one("#epochs").value = "2"
            dialog.query_one("#set").value = overrides
            await settle(pilot, app)
            await pilot.press("ctrl+s")
            await settle(pilot, app)
            await pilot.press("y")
            await wait_for(pilot, lambda: any(isinstance(m, StudyLaunched) for m in messages), "the launch")
            study_id = next(m.study_id for m in messages if isinstance(m, StudyLaunched))
            await wait_for(pilot, lambda: getattr(app.current_study(), "phase", None) == "complete", "the study", 300)
            await pilot.press("4")
            await settle(pilot, app)
            assert f"all {len(CHECKS)} checks pass" in shown(app)
            await pilot.press("3")
            app.clear_notifications()  # the launch's toast may still cover the view's last lines
            await settle(pilot, app)
            text = shown(app)
            assert "geom_R:L-E" in text and "geom_R:L-H" in text, text  # the 3 × 3's contrasts, first of 33
            await pilot.press("q")  # nothing runs any more: the orchestrator's loop ends and the app exits
        assert app.loop_done.wait(10)
        arms = store.rows("SELECT DISTINCT arm FROM runs WHERE study_id = ? AND kind = 'final' ORDER BY arm", [study_id])
    assert sorted(a for (a,) in arms) == sorted(f"{g}_{o}" for g in "EHL" for o in "RSC")


def test_an_objective_an_installed_package_declares_runs_by_its_entry_point_name(tmp_path):
    site = tmp_path / "site"
    installed_components(site, {"leaf_margin": "hc_margin:LeafMargin"}, "hc_margin", OWN_OBJECTIVE)
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))}
    own = ["--set", 'factorial.losses=["regression","leaf_margin"]']
    done = cli(home, "run", "demo", "--name", "installed", *TINY, *own, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    study_id = _study_of(home, "installed")
    assert _audit_results(home, study_id) == {"pass"}
    assert _effects(home, study_id)["loss_E"]["definition"] == "E_LeafMargin - E_R"
    manifest = json.loads((home / "studies" / study_id / "components" / "manifest.json").read_text())
    assert manifest["hc_margin:LeafMargin"]["file"] == "hc_margin.py"  # the study holds what the name named
