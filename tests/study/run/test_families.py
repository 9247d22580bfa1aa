"""Families end to end: a family preset run headless, its declared contrasts checked against a plain
computation from the exported per-seed metrics, and the refusals of cross-study contrasts."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from hierconsole.config import load_preset
from hierconsole.config.family import load_family, sweep_family
from hierconsole.errors import ConfigError
from hierconsole.study.db.storage import Store
from tests.homes import copy_home, family_file
from tests.stores.real import cli, member_studies, registered_home
from tests.tiny import TINY_VALUES

pytestmark = pytest.mark.slow  # worker processes


@pytest.fixture(scope="module")
def family_home(tmp_path_factory, trained_family):
    """The session's family `tinyfam` (tests/homes.py), this module's own copy, and its run's output."""
    return copy_home(trained_family.home, tmp_path_factory.mktemp("family") / "home"), trained_family.stdout


def _exported_per_seed(home: Path, study_id: str, tmp: Path) -> dict[tuple[str, int], dict[str, float]]:
    """(arm, seed) -> level -> mAP from the exported `metrics` table: perturbations averaged by hand."""
    path = tmp / f"{study_id}.csv"
    out = cli(home, "export", "metrics", "--study", study_id, "-o", str(path))
    assert out.returncode == 0, out.stderr
    sums: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for r in pl.read_csv(path).filter((pl.col("metric") == "mAP") & ~pl.col("posthoc")).iter_rows(named=True):
        sums[(r["arm"], r["seed"], r["level"])].append(r["value"])
    table: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for (arm, seed, level), values in sums.items():
        table[(arm, seed)][level] = sum(values) / len(values)
    for cell in table.values():
        cell["hier"] = (cell["middle"] + cell["high"]) / 2
    return table


def _sample_sd(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def test_family_run_queues_every_member_with_shared_seeds(family_home):
    home, stdout = family_home
    studies = member_studies(home)
    assert list(studies) == ["flat", "curved"]
    with Store(home) as store:
        seeds = store.rows(
            "SELECT study_id, list(seed ORDER BY seed) FROM jobs WHERE kind = 'final' GROUP BY study_id ORDER BY 1"
        )
        assert {tuple(s) for _, s in seeds} == {(42, 2024)}
        presets = {sid: json.loads(p) for sid, p in store.rows("SELECT study_id, preset FROM studies")}
    assert presets[studies["flat"]]["geometry"]["poincare"]["c"] == 0.5
    assert presets[studies["curved"]]["geometry"]["poincare"]["c"] == 2.0
    assert "curved - flat" in stdout
    listing = cli(home, "--wide", "families")
    assert listing.returncode == 0 and "tinyfam" in listing.stdout and "2/2 complete" in listing.stdout


def test_every_contrast_value_matches_a_plain_computation_from_exported_metrics(family_home, tmp_path):
    home, _ = family_home
    studies = member_studies(home)
    flat = _exported_per_seed(home, studies["flat"], tmp_path)
    curved = _exported_per_seed(home, studies["curved"], tmp_path)
    out = cli(home, "contrast", "tinyfam", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    first, second = doc["contrasts"]
    assert (first["name"], first["metric"], first["a"], first["b"]) == (
        "curved - flat",
        "hier_mAP",
        "tinyfam:curved",
        "tinyfam:flat",
    )
    # Default pairs: every arm with itself, four levels each.
    assert [(r["arm_a"], r["arm_b"], r["level"]) for r in first["rows"]] == [
        (arm, arm, level) for arm in ("E_R", "H_R", "E_S", "H_S") for level in ("leaf", "middle", "high", "hier")
    ]
    assert [(r["arm_a"], r["arm_b"]) for r in second["rows"]] == [("H_S", "E_S")] * 4
    for contrast in (first, second):
        for row in contrast["rows"]:
            expected = {
                str(s): curved[(row["arm_a"], s)][row["level"]] - flat[(row["arm_b"], s)][row["level"]]
                for s in (42, 2024)
            }
            assert row["per_seed"].keys() == expected.keys()
            for s, v in expected.items():
                assert row["per_seed"][s] == pytest.approx(v, abs=1e-12)
            values = list(expected.values())
            assert row["mean"] == pytest.approx(sum(values) / 2, abs=1e-12)
            assert row["sd"] == pytest.approx(_sample_sd(values), abs=1e-12)
            assert row["positive_seeds"] == sum(v > 0 for v in values)
            assert row["n_seeds"] == 2
    # The Euclidean cells do not see the curvature: same seed, same init and batches, so exactly zero.
    assert all(r["mean"] == 0.0 for r in first["rows"] if r["arm_a"].startswith("E"))
    assert any(r["mean"] != 0.0 for r in first["rows"] if r["arm_a"].startswith("H"))

    # Two studies by name and FAMILY:member, with --arms: the same numbers as the family's declaration.
    pair = cli(home, "contrast", "tinyfam:curved", studies["flat"], "--arms", "HS:ES", "--json")
    assert pair.returncode == 0, pair.stderr
    single = json.loads(pair.stdout)
    assert set(single) == {"schema", "metric", "a", "b", "rows"}
    assert [r["per_seed"] for r in single["rows"]] == [r["per_seed"] for r in second["rows"]]

    # The exported table holds the same values.
    csv = tmp_path / "contrasts.csv"
    exported = cli(home, "export", "contrasts", "--family", "tinyfam", "-o", str(csv))
    assert exported.returncode == 0, exported.stderr
    frame = pl.read_csv(csv)
    assert frame.height == len(first["rows"]) + len(second["rows"])
    assert frame["mean"].to_list() == pytest.approx([r["mean"] for r in first["rows"] + second["rows"]], abs=1e-12)
    md = tmp_path / "contrasts.md"
    assert cli(home, "export", "contrasts", "--family", "tinyfam", "-o", str(md)).returncode == 0
    assert "± " in md.read_text()
    # Each row names the column it compares (the export once said hier_mAP on the leaf/middle/high rows).
    assert list(zip(frame["level"], frame["metric"], strict=True)) == [(lv, f"{lv}_mAP") for lv in frame["level"]]
    for row in md.read_text().splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        level = next(c for c in cells if c in ("leaf", "middle", "high", "hier"))
        assert f"{level}_mAP" in cells and all(c != "hier_mAP" or level == "hier" for c in cells), row
    text = cli(home, "contrast", "tinyfam")
    assert text.returncode == 0 and "H_S − E_S" in text.stdout
    assert "mAP per level and the hier score, paired by seed" in " ".join(text.stdout.split())


def test_contrasts_refuse_unlocked_other_dataset_and_other_qg_protocol(family_home, tmp_path, tiny_fs):
    home = tmp_path / "home"
    shutil.copytree(family_home[0], home)
    studies = member_studies(home)
    flat, curved = studies["flat"], studies["curved"]
    # A study whose hier score averages other levels (evaluation.hier_levels) measures another hier_mAP.
    with Store(home) as store:
        store.execute("UPDATE study_levels SET in_hier = false WHERE study_id = ? AND code = 'middle'", [flat])
    out = cli(home, "contrast", curved, flat)
    assert out.returncode == 2 and "average different levels in their hier score (middle, high vs high" in out.stderr
    with Store(home) as store:
        store.execute("UPDATE study_levels SET in_hier = true WHERE study_id = ? AND code = 'middle'", [flat])
        store.execute("UPDATE splits SET sha256 = 'elsewhere' WHERE study_id = ? AND role = 'qg:42'", [flat])
    out = cli(home, "contrast", curved, flat)
    assert out.returncode == 2 and "different Q/G protocols" in out.stderr and "qg:42" in out.stderr
    assert "Traceback" not in out.stderr
    with Store(home) as store:
        store.execute("UPDATE studies SET dataset_id = 'other' WHERE study_id = ?", [flat])
    out = cli(home, "contrast", curved, flat)
    assert out.returncode == 2 and "different datasets (tiny vs other)" in out.stderr
    with Store(home) as store:
        store.execute("UPDATE studies SET locked_at = NULL, phase = 'training' WHERE study_id = ?", [flat])
    out = cli(home, "contrast", curved, flat)
    assert out.returncode == 2 and f"study {flat} is not locked (phase training)" in out.stderr
    out = cli(home, "contrast", curved, "tinyfam:nope")
    assert out.returncode == 2 and "has no member 'nope'" in out.stderr
    out = cli(home, "contrast", curved, curved, "--metric", "bogus")
    assert out.returncode == 2 and "not a contrast metric" in out.stderr


def test_family_files_are_validated_before_anything_runs(tmp_path):
    path = family_file(tmp_path)
    text = path.read_text().replace('"geometry.poincare.c" = 0.5', '"geometry.poincare.c" = -1\n"training.seeds" = [1]')
    text = text.replace('arms = "H_S:E_S"', 'arms = "H_S:X"')
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_family(bad)
    message = str(info.value)
    assert "members.flat.training.seeds: members share the training seeds" in message
    assert "members.flat: geometry.poincare.c = -1" in message
    assert "contrasts[1].arms = 'H_S:X'" in message
    home = tmp_path / "home"
    out = cli(home, "run", str(bad))
    assert out.returncode == 2 and "invalid family" in out.stderr
    assert not (home / "studies").exists()


def test_shipped_families_load():
    for name in ("nabirds-semantic-control", "nabirds-curvature-control", "cub-genus-disjoint", "nabirds-parent-disjoint-outer"):
        family = load_family(name)
        assert len({m.preset.training.seeds for m in family.members}) == 1
    curvature = load_family("nabirds-curvature-control")
    points = {m.name: (m.preset.geometry.poincare.c, m.preset.geometry.poincare.r) for m in curvature.members}
    assert points == {
        "euclidean": (0.1, 0.4),
        "near-flat": (1e-6, 0.4),
        "base": (0.1, 0.4),
        "strong": (1.0, 0.4),
        "small-radius": (0.1, 0.2),
        "large-radius": (0.1, 0.8),
    }
    assert {m.preset.training.epochs for m in curvature.members} == {84}
    semantic = load_family("nabirds-semantic-control")
    weights = {m.name: m.preset.training.level_weights for m in semantic.members}
    assert weights["leaf-only"] == (0.25, 0.0, 0.0) and weights["shuffled"] == (0.25, 0.5, 1.0)
    assert [m.preset.controls.taxonomy_shuffle for m in semantic.members] == [False, False, False, True]
    assert {(m.preset.training.lr, m.preset.temperature.euclidean) for m in semantic.members} == {(1e-4, 0.3)}
    assert all(m.preset.training.select_epoch for m in semantic.members)
    outer = load_family("cub-genus-disjoint")
    assert [m.preset.split.seed for m in outer.members] == [1, 2, 3]


def test_sweep_makes_one_member_per_grid_point():
    base = load_preset("demo")
    family = sweep_family("demo", base, [("geometry.poincare.c", [0.1, 1.0]), ("geometry.poincare.r", [0.2, 0.4])], None)
    assert [m.name for m in family.members] == ["c=0.1_r=0.2", "c=0.1_r=0.4", "c=1.0_r=0.2", "c=1.0_r=0.4"]
    assert family.members[2].preset.geometry.poincare.c == 1.0
    assert [(c.a, c.b) for c in family.contrasts] == [(m, "c=0.1_r=0.2") for m in ("c=0.1_r=0.4", "c=1.0_r=0.2", "c=1.0_r=0.4")]


def test_sweep_runs_a_grid_as_a_family(tmp_path, tiny_fs):
    home = registered_home(tmp_path / "home", tiny_fs)
    sets = [arg for k, v in TINY_VALUES.items() for arg in ("--set", f"{k}={json.dumps(v)}")]
    out = cli(
        home, "sweep", "demo", "--grid", "training.lr=1e-3,2e-3", "--name", "lrs", "--epochs", "1", "--seeds", "42",
        "--set", 'training.cells=["E_S"]', *sets,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(member_studies(home)) == ["lr=0.001", "lr=0.002"]
    doc = json.loads(cli(home, "contrast", "lrs", "--json").stdout)
    [contrast] = doc["contrasts"]
    assert contrast["name"] == "lr=0.002 - lr=0.001"
    assert [r["n_seeds"] for r in contrast["rows"]] == [1] * 4 and all(r["sd"] is None for r in contrast["rows"])


def test_effects_of_a_family_pool_its_members_with_the_member_as_unit(family_home):
    home, _ = family_home
    studies = member_studies(home)
    per_member = {}
    for member, study_id in studies.items():
        out = cli(home, "effects", study_id, "--metric", "hier_mAP", "--json")
        assert out.returncode == 0, out.stderr
        per_member[member] = {name: e["mean"] for name, e in json.loads(out.stdout)["effects"]["hier_mAP"].items()}
    out = cli(home, "effects", "tinyfam", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert list(doc["effects"]) == ["geom_R", "geom_S", "loss_E", "loss_H", "interaction"]
    for name, e in doc["effects"].items():
        values = [per_member[m][name] for m in ("flat", "curved")]
        assert e["per_member"] == pytest.approx({"flat": values[0], "curved": values[1]}, abs=1e-12)
        assert e["mean"] == pytest.approx(sum(values) / 2, abs=1e-12)
        assert e["sd"] == pytest.approx(_sample_sd(values), abs=1e-12)
        assert e["n_members"] == 2
    text = cli(home, "--wide", "effects", "tinyfam")
    assert text.returncode == 0 and "pooled over members" in text.stdout
