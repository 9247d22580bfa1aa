"""Outer-split families with arms (paper Sec. 5.5) end to end: a small family of three hierarchy-disjoint
outer splits x two configurations run headless, its arms (mean ± SD over splits) and paired gains per
split checked against a hand computation from the exported per-member metrics, and the refusals."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from hierconsole.config.family import load_family
from hierconsole.errors import ConfigError
from hierconsole.study.db.storage import Store
from tests.shown_numbers import assert_whole, plain, signed
from tests.stores.real import cli, member_studies, registered_home, run_family
from tests.tiny import TINY_VALUES

pytestmark = pytest.mark.slow  # worker processes

SPLITS = ("s1", "s2", "s3")
ARMS = {  # arm name -> (configuration, cell or baseline)
    "frozen": ("reg", "frozen"),
    "matched-euclidean": ("reg", "E_R"),
    "matched-hyperbolic": ("reg", "H_R"),
    "taxonomy-supcon": ("sup", "E_S"),
}
GAINS = {"SupCon - matched H": ("taxonomy-supcon", "matched-hyperbolic"), "H - E": ("matched-hyperbolic", "matched-euclidean")}
LEVELS = ("leaf", "middle", "high", "hier")

COMMON = {
    **TINY_VALUES,
    "training.epochs": 2,
    "training.seeds": [42, 2024],
    "compute.max_parallel_jobs": 2,
    # Outer splits as the paper draws them: middle groups disjoint between the parts, one seed per split.
    "split.protocol": "hierarchy_disjoint",
    "split.level": "middle",
    # Three test middles: every split has valid queries at every level (a level without would be left out).
    "split.counts": [2, 1, 3],
    "evaluation.n_query": 8,
}
CONFIGURATIONS = {
    "reg": {"training.cells": ["E_R", "H_R"], "evaluation.baselines": ["frozen"]},
    "sup": {"training.cells": ["E_S"], "training.lr": 2e-3, "training.level_weights": [0.25, 0.5, 1.0]},
}


def _toml(values: dict) -> list[str]:
    return [f'"{k}" = {json.dumps(v)}' for k, v in values.items()]


def arms_family_file(path: Path, name: str = "tinyarms", arms: dict | None = None) -> Path:
    lines = ["[family]", f'name = "{name}"', 'description = "three outer splits, four arms"', 'base = "demo"']
    lines += ["", "[overrides]", *_toml(COMMON)]
    for i, split in enumerate(SPLITS, start=1):
        lines += ["", f"[splits.{split}]", *_toml({"split.seed": i})]
    for config, values in CONFIGURATIONS.items():
        lines += ["", f"[configurations.{config}]", *_toml(values)]
    for arm, (config, cell) in (arms or ARMS).items():
        lines += ["", "[[arms]]", f'name = "{arm}"', f'configuration = "{config}"', f'arm = "{cell}"']
    for gain, (a, b) in GAINS.items():
        lines += ["", "[[gains]]", f'name = "{gain}"', f'a = "{a}"', f'b = "{b}"']
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def arms_home(tmp_path_factory, tiny_fs):
    folder = tmp_path_factory.mktemp("outer-arms")
    home = registered_home(folder / "home", tiny_fs)
    done = run_family(home, arms_family_file(folder / "tinyarms.toml"), columns=200)
    # The run ends with the arms and the gains, as `families FAMILY` shows them.
    flat = " ".join(done.stdout.split())
    assert "arms per outer split" in flat and "paired gains per outer split" in flat
    return home


def _exported(home: Path, study_id: str, tmp: Path) -> dict[str, dict[str, float]]:
    """arm -> level -> value on this member's split, by hand from the exported `metrics` table: the Q/G
    perturbations averaged per (arm, seed, level), the hier score the mean of middle and high, then the
    mean over the arm's seeds (one 'seed' for the frozen baseline)."""
    path = tmp / f"{study_id}.csv"
    out = cli(home, "export", "metrics", "--study", study_id, "-o", str(path))
    assert out.returncode == 0, out.stderr
    values: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for r in pl.read_csv(path).filter((pl.col("metric") == "mAP") & ~pl.col("posthoc")).iter_rows(named=True):
        values[(r["arm"], r["seed"], r["level"])].append(r["value"])
    per_seed: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for (arm, seed, level), vs in values.items():
        per_seed[(arm, seed)][level] = sum(vs) / len(vs)
    for cell in per_seed.values():
        cell["hier"] = (cell["middle"] + cell["high"]) / 2
    out_: dict[str, dict[str, float]] = {}
    for arm in {a for a, _ in per_seed}:
        seeds = [cell for (a, _), cell in per_seed.items() if a == arm]
        out_[arm] = {level: sum(c[level] for c in seeds) / len(seeds) for level in LEVELS}
    return out_


def _mean_sd(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def test_arms_and_gains_match_a_hand_computation_from_exported_metrics(arms_home, tmp_path):
    home = arms_home
    studies = member_studies(home)
    # Its members train different cells: `effects FAMILY` has no pooled effect and points here.
    effects = cli(home, "effects", "tinyarms")
    assert effects.returncode == 2 and "`hierconsole families tinyarms`" in effects.stderr
    assert list(studies) == [f"{s}.{c}" for s in SPLITS for c in CONFIGURATIONS]
    with Store(home, read_only=True) as store:
        seeds = {json.loads(p)["split"]["seed"] for (p,) in store.rows("SELECT preset FROM studies")}
    assert seeds == {1, 2, 3}
    by_hand = {member: _exported(home, study, tmp_path) for member, study in studies.items()}
    # arm name -> level -> split -> value
    expected = {
        name: {lv: {s: by_hand[f"{s}.{config}"][cell][lv] for s in SPLITS} for lv in LEVELS}
        for name, (config, cell) in ARMS.items()
    }
    out = cli(home, "families", "tinyarms", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    outer = doc["outer"]
    assert outer["unit"] == "outer split" and outer["splits"] == list(SPLITS)
    assert outer["metrics"] == [f"{lv}_mAP" for lv in LEVELS] and outer["omitted"] == []
    assert list(outer["arms"]) == list(ARMS)
    for name, (config, cell) in ARMS.items():
        arm = outer["arms"][name]
        assert (arm["arm"], arm["configuration"]) == (cell, config)
        for lv in LEVELS:
            got = arm["metrics"][f"{lv}_mAP"]
            want = expected[name][lv]
            assert got["per_split"].keys() == want.keys()
            for s in SPLITS:
                assert got["per_split"][s] == pytest.approx(want[s], abs=1e-12)
            mean, sd = _mean_sd(list(want.values()))
            assert got["mean"] == pytest.approx(mean, abs=1e-12)
            assert got["sd"] == pytest.approx(sd, abs=1e-12)
            assert got["seeds"] == {s: 1 if cell == "frozen" else 2 for s in SPLITS}
    assert list(outer["gains"]) == list(GAINS)
    for gain, (a, b) in GAINS.items():
        for lv in LEVELS:
            got = outer["gains"][gain]["metrics"][f"{lv}_mAP"]
            diffs = {s: expected[a][lv][s] - expected[b][lv][s] for s in SPLITS}
            for s in SPLITS:
                assert got["per_split"][s] == pytest.approx(diffs[s], abs=1e-12)
            mean, sd = _mean_sd(list(diffs.values()))
            assert got["mean"] == pytest.approx(mean, abs=1e-12)
            assert got["sd"] == pytest.approx(sd, abs=1e-12)
            assert got["positive_splits"] == sum(d > 0 for d in diffs.values())
            assert got["n_splits"] == 3
    # The arms differ: a table of equal values would not test the pairing.
    assert len({outer["arms"][n]["metrics"]["hier_mAP"]["mean"] for n in ARMS}) == 4

    # The exports hold the same numbers, one row per (arm, metric) and (gain, metric).
    arms_csv, gains_csv = tmp_path / "arms.csv", tmp_path / "gains.csv"
    for table, path in (("outer-arms", arms_csv), ("outer-gains", gains_csv)):
        done = cli(home, "export", table, "--family", "tinyarms", "-o", str(path))
        assert done.returncode == 0, done.stderr
        assert f"wrote table {table}" in done.stdout
    arms = pl.read_csv(arms_csv)
    assert arms.height == len(ARMS) * len(LEVELS)
    for r in arms.iter_rows(named=True):
        want = expected[r["name"]][r["metric"].removesuffix("_mAP")]
        assert [r[s] for s in SPLITS] == pytest.approx([want[s] for s in SPLITS], abs=1e-12)
        assert (r["mean"], r["sd"]) == pytest.approx(_mean_sd(list(want.values())), abs=1e-12)
    gains = pl.read_csv(gains_csv)
    assert gains.height == len(GAINS) * len(LEVELS)
    for r in gains.iter_rows(named=True):
        a, b = GAINS[r["gain"]]
        lv = r["metric"].removesuffix("_mAP")
        diffs = [expected[a][lv][s] - expected[b][lv][s] for s in SPLITS]
        assert [r[s] for s in SPLITS] == pytest.approx(diffs, abs=1e-12)
        assert (r["mean"], r["sd"]) == pytest.approx(_mean_sd(diffs), abs=1e-12)
    md = tmp_path / "gains.md"
    assert cli(home, "export", "outer-gains", "--family", "tinyarms", "-o", str(md)).returncode == 0
    assert "± " in md.read_text()

    # The text form: members, then the arms and the gains as tables.
    text = cli(home, "--wide", "families", "tinyarms")
    assert text.returncode == 0, text.stderr
    flat = " ".join(text.stdout.split())
    assert "arms per outer split" in flat and "paired gains per outer split" in flat
    assert "SupCon - matched H" in flat and "taxonomy-supcon" in flat
    hier = outer["arms"]["taxonomy-supcon"]["metrics"]["hier_mAP"]
    assert f"{hier['mean']:.4f} ± {hier['sd']:.4f}" in flat


def test_a_family_without_the_arms_is_refused_in_one_line(arms_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(arms_home, home)
    studies = member_studies(home)
    # A stored family whose members' results lack a declared arm (an arm their studies never trained).
    with Store(home) as store:
        (definition,) = store.one("SELECT definition FROM families")
        doc = json.loads(definition)
        doc["outer"]["arms"][3]["arm"] = "H_S"
        store.execute("UPDATE families SET definition = ?", [json.dumps(doc)])
    for args in (("families", "tinyarms"), ("families", "tinyarms", "--json")):
        out = cli(home, *args)
        assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
        [line] = out.stderr.strip().splitlines()
        assert "member s1.sup has no results for arm H_S (it has E_S)" in line, line
    assert set(member_studies(home).values()) == set(studies.values())
    # A family that declares no arms: the export says so and writes nothing.
    with Store(home) as store:
        store.execute("UPDATE families SET definition = json_object('name', 'tinyarms', 'members', json('[]'))")
    target = tmp_path / "arms.csv"
    out = cli(home, "export", "outer-arms", "--family", "tinyarms", "-o", str(target))
    assert out.returncode == 2 and not target.exists()
    [line] = out.stderr.strip().splitlines()
    assert "declares no outer-split arms" in line
    out = cli(home, "export", "outer-arms", "--family", "tinyarms", "--metric", "hier_mAP", "-o", str(target))
    assert out.returncode == 2 and "--metric" in out.stderr and not target.exists()


def test_arms_a_configuration_does_not_train_are_refused_before_anything_runs(tmp_path):
    bad = arms_family_file(tmp_path / "bad.toml", arms={**ARMS, "hs": ("sup", "H_S"), "pca": ("reg", "pca")})
    with pytest.raises(ConfigError) as info:
        load_family(bad)
    message = str(info.value)
    assert "arms[4]: member s1.sup does not train H_S (cells E_S; baselines none)" in message
    assert "arms[5]: member s1.reg does not score pca (cells E_R, H_R; baselines frozen)" in message
    home = tmp_path / "home"
    out = cli(home, "run", str(bad))
    assert out.returncode == 2 and "invalid family" in out.stderr and "Traceback" not in out.stderr
    assert not (home / "studies").exists()
    text = bad.read_text().replace('arm = "E_S"', 'arm = "E_S"\nconfiguration2 = 1')
    text += '\n[members.extra]\n"training.lr" = 1e-3\n'
    bad.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_family(bad)
    assert "give either [members.NAME] or [splits.NAME]" in str(info.value)
    assert "unknown key(s) configuration2" in str(info.value)


def test_shipped_outer_arms_family_loads_with_the_papers_arms():
    family = load_family("nabirds-parent-disjoint-outer-arms")
    assert family.outer is not None
    assert [m.name for m in family.members] == [f"split-{i}.{c}" for i in (1, 2, 3) for c in ("matched", "supcon")]
    assert [m.preset.split.seed for m in family.members] == [1, 1, 2, 2, 3, 3]
    assert [(a.label, a.arm) for a in family.outer.arms] == [
        ("Frozen DINOv2", "frozen"),
        ("matched Euclidean", "E_R"),
        ("matched Hyperbolic", "H_R"),
        ("Taxonomy-SupCon", "E_S"),
    ]
    assert [(g.a, g.b) for g in family.outer.gains] == [
        ("taxonomy-supcon", "matched-hyperbolic"),
        ("matched-hyperbolic", "matched-euclidean"),
    ]
    assert all(m.preset.training.select_epoch for m in family.members)
    matched = family.member("split-1.matched").preset
    assert (matched.training.lr, matched.geometry.poincare.c, matched.geometry.poincare.r) == (5e-5, 0.1, 0.4)
    supcon = family.member("split-1.supcon").preset
    assert (supcon.training.lr, supcon.temperature.euclidean, supcon.training.level_weights) == (1e-4, 0.3, (0.25, 0.5, 1.0))
    # The factorial-per-split families stay, and say which they are.
    for name in ("nabirds-parent-disjoint-outer", "cub-genus-disjoint"):
        factorial = load_family(name)
        assert factorial.outer is None and "2x2 factorial" in factorial.description
        assert f"{name.removesuffix('-outer')}-outer-arms" in factorial.description
    assert family.definition()["outer"]["members"]["split-2.supcon"] == ["split-2", "supcon"]
    cub = load_family("cub-genus-disjoint-outer-arms")
    assert cub.outer is not None and [a.arm for a in cub.outer.arms] == ["frozen", "E_R", "H_R", "E_S"]
    assert {(m.preset.geometry.poincare.c, m.preset.evaluation.aggregation) for m in cub.members} == {(2.0, "macro")}
    assert [m.preset.split.seed for m in cub.members] == [1, 1, 2, 2, 3, 3]
    # The splits are the Genus-disjoint family's.
    genus = load_family("cub-genus-disjoint").members[0].preset.split
    assert (cub.members[0].preset.split.level, cub.members[0].preset.split.fractions) == (genus.level, genus.fractions)


@pytest.mark.parametrize("columns", [60, 100, 200])
def test_every_arm_and_gain_number_is_shown_whole_at_any_width(arms_home, columns):
    doc = json.loads(cli(arms_home, "families", "tinyarms", "--json").stdout)["outer"]
    words = []
    for arm in doc["arms"].values():
        for m in arm["metrics"].values():
            words += [plain(v, 4) for v in m["per_split"].values()] + [plain(m["mean"], 4), plain(m["sd"], 4)]
    for gain in doc["gains"].values():
        for m in gain["metrics"].values():
            words += [signed(v, 6) for v in m["per_split"].values()] + [signed(m["mean"], 6), plain(m["sd"], 6)]
    out = cli(arms_home, "families", "tinyarms", columns=columns)
    assert out.returncode == 0, out.stderr
    assert_whole(out.stdout, words, f"families tinyarms at {columns} columns")


def test_the_notebook_reads_the_same_tables_as_the_export(arms_home, tmp_path):
    import hierconsole as hc

    home = hc.open_home(arms_home)
    for table, gains in (("outer-arms", False), ("outer-gains", True)):
        path = tmp_path / f"{table}.parquet"
        assert cli(arms_home, "export", table, "--family", "tinyarms", "-o", str(path)).returncode == 0
        assert home.outer_arms("tinyarms", gains=gains).equals(pl.read_parquet(path))


def test_the_family_report_has_the_arms_and_gains(arms_home, tmp_path):
    out = tmp_path / "family.md"
    done = cli(arms_home, "report", "tinyarms", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    section = text.split("## Arms over outer splits", 1)[1].split("\n## ", 1)[0]
    doc = json.loads(cli(arms_home, "families", "tinyarms", "--json").stdout)["outer"]
    supcon = doc["arms"]["taxonomy-supcon"]["metrics"]["hier_mAP"]
    gain = doc["gains"]["SupCon - matched H"]["metrics"]["hier_mAP"]
    assert all(f"{v:.4f}" in section for v in supcon["per_split"].values())
    assert all(f"{v:.6f}" in section for v in gain["per_split"].values())
