"""K = 3 golden baselines: three-level results stay bit-identical while the level code is generalised.

Issue 41 generalises hierconsole from exactly three taxonomy levels (leaf, middle, high) to any depth
K = 2..12. For three-level data nothing may change: not one bit of a hash, a split, a metric, a loss or its
gradient, an exported table or the report. These tests recompute what the code computed when the goldens
were captured (tests/golden/k3, captured before any level code changed) and compare exactly: JSON as text
(floats written by their repr), arrays by dtype, shape and bytes, exported files by their bytes after
masking what differs between any two runs (the study id, the lock hash that covers it, timestamps).

- presets and families: `Preset.sha256()` of every shipped preset, `Family.sha256()` of every shipped
  family and the preset hash of each member;
- datasets: `FeatureSet.sha256()` / `Taxonomy.sha256()` of synthetic:demo, the tiny test data, and the CUB
  and NABirds fixture folders (tests/datasets/conftest.py) as imported;
- splits of synthetic:demo (official, hierarchy-disjoint at middle, tuning, Q/G) and their strict valid
  counts; taxonomy relation codes and the development shuffle;
- engine: strict retrieval (per-query AP, hits, aggregates) on NumPy's and torch's ranking paths, chunked
  and in blocks, with ties; both losses and the closed forms of engine/fused.py, values and gradients;
- a trained tiny study (tests/homes.py's BASELINES home) exported table by table and reported in Markdown
  through the CLI (slow);
- the store schema: store/schema.sql and store/views.sql equal tests/stores/schema_v6.sql and views_v6.sql
  while SCHEMA_VERSION is 6 (a schema change must bump the version and add a migration).

Golden values depend on the installed torch and NumPy (the report names the torch version): a dependency
upgrade that changes them is a separate, deliberate regeneration.

Regenerate ONLY on purpose, with a commit saying why: `python -m tests.golden.capture` from the repository
root (it clears tests/golden/k3 and runs this module with HIERCONSOLE_WRITE_GOLDEN=1).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from hierconsole.config import load_preset
from hierconsole.config.family import list_families, load_family
from hierconsole.config.files import list_presets
from hierconsole.datasets import FeatureSet, import_cub, import_nabirds, make_synthetic
from hierconsole.datasets.splits import (
    hierarchy_disjoint_split,
    official_split,
    qg_perturbations,
    strict_valid_counts,
    tuning_split,
)
from hierconsole.datasets.synthetic import DEMO_CONFIG
from hierconsole.engine import fused, losses
from hierconsole.engine.geometry import TRAIN_CLIP, Euclidean, Geometry, Poincare
from hierconsole.engine.retrieval import Evaluation, Unit, evaluate, evaluate_units, strict_masks
from hierconsole.levels import PAPER_CODES as LEVELS
from hierconsole.study.analysis.frames import TABLES
from hierconsole.study.db.storage import SCHEMA_VERSION, Store
from hierconsole.taxonomy import development_shuffle, relation_codes
from tests.datasets.conftest import Built, cub, nabirds  # noqa: F401 - fixtures, used by name
from tests.golden.store import check_arrays, check_file_bytes, check_json, sha256, writing
from tests.homes import TrainedStudy, copy_home
from tests.tiny import TINY, tiny_preset

ROOT = Path(__file__).resolve().parents[1]


# -- presets, families, datasets --------------------------------------------------------------------------
def test_preset_and_family_hashes() -> None:
    hashes: dict[str, Any] = {"presets": {}, "families": {}}
    for name, _path, _about in list_presets():
        hashes["presets"][name] = load_preset(name).sha256()
    hashes["presets"]["tests.tiny.tiny_preset()"] = tiny_preset().sha256()
    for name, _path, _about in list_families():
        family = load_family(name)
        hashes["families"][name] = {
            "sha256": family.sha256(),
            "members": {m.name: m.preset.sha256() for m in family.members},
        }
    check_json("presets.json", hashes)


def _dataset_hashes(fs: FeatureSet) -> dict[str, Any]:
    return {
        "featureset_sha256": fs.sha256(),
        "taxonomy_sha256": fs.taxonomy.sha256(),
        "rows": len(fs),
        "leaves_middles_highs": [fs.taxonomy.n_leaves, fs.taxonomy.counts[1], fs.taxonomy.counts[2]],
        "level_names": list(fs.taxonomy.level_names),
    }


def test_dataset_and_taxonomy_hashes(cub: Built, nabirds: Built) -> None:  # noqa: F811 - fixtures
    assert cub.taxonomy is not None
    check_json(
        "datasets.json",
        {
            "synthetic:demo": _dataset_hashes(make_synthetic(DEMO_CONFIG)),
            "tests.tiny.TINY": _dataset_hashes(make_synthetic(TINY)),
            "tests/datasets cub fixture": _dataset_hashes(import_cub(cub.root, cub.features, cub.taxonomy)),
            "tests/datasets nabirds fixture": _dataset_hashes(import_nabirds(nabirds.root, nabirds.features)),
        },
    )


# -- splits and the taxonomy's own functions ----------------------------------------------------------------
def test_splits_of_the_demo_dataset() -> None:
    fs = make_synthetic(DEMO_CONFIG)
    labels = fs.labels
    official = official_split(fs)
    disjoint = hierarchy_disjoint_split(labels, level="middle", seed=0)
    disjoint_official = hierarchy_disjoint_split(labels, level="middle", seed=7, official=fs.split)
    disjoint_leaf = hierarchy_disjoint_split(
        labels, level="leaf", counts=None, fractions=(0.5, 0.2, 0.3), seed=3
    )
    tuning_holdout = tuning_split(labels, official["train"], seed=0)
    tuning_given = tuning_split(labels, disjoint["train"], disjoint["val"], seed=1, n_query=40)
    qgs = qg_perturbations(labels, official["test"], n_query=150)
    splits = {
        "official": official,
        "disjoint_middle": disjoint,
        "disjoint_middle_official": disjoint_official,
        "disjoint_leaf": disjoint_leaf,
        "tuning_holdout": tuning_holdout,
        "tuning_given_val": tuning_given,
        **{f"qg_{s.params['seed']}": s for s in qgs},
    }
    check_arrays(
        "splits.npz",
        {f"{key}.{part}": idx for key, split in splits.items() for part, idx in split.parts.items()},
    )
    valid = {
        "official train->test": strict_valid_counts(labels, official["test"], official["train"]),
        "disjoint test->test": strict_valid_counts(labels, disjoint["test"], disjoint["test"]),
        "disjoint val->train": strict_valid_counts(labels, disjoint["val"], disjoint["train"]),
    }
    check_json(
        "splits.json",
        {
            "splits": {
                key: {"sha256": s.sha256(), "sizes": s.sizes(), "params": s.params}
                for key, s in splits.items()
            },
            "strict_valid_counts": valid,
        },
    )


def test_relation_codes_and_development_shuffle() -> None:
    fs = make_synthetic(TINY)
    tax = fs.taxonomy
    rng = np.random.default_rng(0)
    dev = np.unique(fs.leaf[fs.split != 2])[: tax.n_leaves - 2]  # two test-only leaves stay put
    shuffles = {seed: development_shuffle(tax, dev, seed=seed) for seed in (0, 20260818)}
    rows = fs.labels[rng.choice(len(fs), 50, replace=False)]
    check_arrays(
        "taxonomy.npz",
        {
            "relation_codes": relation_codes(rows, fs.labels[:70]),
            "relation_codes_torch": losses.relation_codes(torch.from_numpy(rows)).numpy(),
            **{f"shuffle_{s}.leaf_middle": d.taxonomy.parents[0] for s, d in shuffles.items()},
            **{f"shuffle_{s}.middle_high": d.taxonomy.parents[1] for s, d in shuffles.items()},
        },
    )
    check_json(
        "taxonomy.json",
        {
            str(s): {
                "sha256": d.sha256,
                "dev_leaves": d.dev_nodes[0].tolist(),
                "dev_middles": d.dev_nodes[1].tolist(),
                "fixed": [d.fixed[0], d.fixed[1], d.fixed_min[0], d.fixed_min[1]],
            }
            for s, d in shuffles.items()
        },
    )


# -- engine ---------------------------------------------------------------------------------------------------
N_LEAVES, N_MIDDLES, N_HIGHS = 20, 8, 3


def three_level_labels(rng: np.random.Generator, n: int) -> np.ndarray:
    """[n, 3] labels of a fixed tree (leaf -> middle -> high), every middle and high used."""
    leaf_middle = np.arange(N_LEAVES) % N_MIDDLES
    middle_high = np.arange(N_MIDDLES) % N_HIGHS
    leaf = rng.integers(0, N_LEAVES, n)
    middle = leaf_middle[leaf]
    return np.stack([leaf, middle, middle_high[middle]], axis=1).astype(np.int64)


FIELDS = ("query_index", "ap", "hits", "groups", "n_positives")
LABEL_FIELDS = ("query_index", "groups", "n_positives")
"""What depends on the labels alone: the same in every case, stored once."""


def _evaluation_arrays(ev: Evaluation, fields: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {f"{level}.{field}": getattr(ev.levels[level], field) for level in LEVELS for field in fields}


def _evaluation_numbers(ev: Evaluation) -> dict[str, Any]:
    return {
        "ks": list(ev.ks),
        "aggregate": {how: ev.aggregate(how) for how in ("micro", "macro")},
        "flat": {how: ev.flat(how) for how in ("micro", "macro")},
    }


def _assert_same_evaluation(key: str, ev: Evaluation, reference_key: str, reference: Evaluation) -> None:
    """`ev` equals `reference` bit for bit (the goldens hold `reference` only, to stay small)."""
    now, ref = _evaluation_arrays(ev, FIELDS), _evaluation_arrays(reference, FIELDS)
    for name, array in now.items():
        assert array.dtype == ref[name].dtype and array.tobytes() == ref[name].tobytes(), (
            f"golden retrieval.npz: {key} no longer equals {reference_key} in {name} "
            "(the goldens hold the chunked case; the whole and threaded ones were equal to it when captured)"
        )


def test_retrieval() -> None:
    rng = np.random.default_rng(0)
    n_q, n_g, dim = 150, 310, 6
    q_lab, g_lab = three_level_labels(rng, n_q), three_level_labels(rng, n_g)
    q = rng.standard_normal((n_q, dim)).astype(np.float32) * 0.3
    g = rng.standard_normal((n_g, dim)).astype(np.float32) * 0.3
    tied_q, tied_g = np.round(q, 1), np.round(g, 1)  # coarse values: many equal distances (stable order)
    # chunks of 32 queries (150 is no multiple) in blocks of two chunks: the budget's half holds 2 x 32 rows
    budget = 2 * 8 * n_g * 32 * 2 + 1
    geometries: dict[str, Geometry] = {"euclidean": Euclidean(), "poincare": Poincare(c=1.0)}
    chunked: dict[str, Evaluation] = {}
    for gname, geometry in geometries.items():
        for dtype in (torch.float32, torch.float64):  # float32 on CPU ranks in NumPy, float64 in torch
            for tie, (qa, ga) in {"plain": (q, g), "tied": (tied_q, tied_g)}.items():
                qt, gt = torch.from_numpy(qa).to(dtype), torch.from_numpy(ga).to(dtype)
                key = f"{gname}.{str(dtype).removeprefix('torch.')}.{tie}"
                chunked[key] = evaluate(qt, gt, q_lab, g_lab, geometry, chunk_size=32, memory_budget=budget)
                _assert_same_evaluation(
                    f"{key} in one chunk", evaluate(qt, gt, q_lab, g_lab, geometry), key, chunked[key]
                )
    # evaluate_units: two threads, strict positives shared by labels_key (its bits_for path)
    units = [
        Unit(torch.from_numpy(q), torch.from_numpy(g), q_lab, g_lab, geometry, labels_key="qg")
        for geometry in geometries.values()
    ]
    for gname, ev in zip(geometries, evaluate_units(units, workers=2), strict=True):
        _assert_same_evaluation(
            f"{gname} by evaluate_units", ev, f"{gname}.float32.plain", chunked[f"{gname}.float32.plain"]
        )
    first_key, first = next(iter(chunked.items()))
    for key, ev in chunked.items():  # what depends on the labels alone is stored once
        for name, array in _evaluation_arrays(ev, LABEL_FIELDS).items():
            assert array.tobytes() == _evaluation_arrays(first, LABEL_FIELDS)[name].tobytes(), (
                f"golden retrieval.npz: {key}'s {name} differs from {first_key}'s (it depends on the labels alone)"
            )
    arrays = {f"labels.{k}": v for k, v in _evaluation_arrays(first, LABEL_FIELDS).items()}
    for key, ev in chunked.items():
        arrays.update({f"{key}.{k}": v for k, v in _evaluation_arrays(ev, ("ap", "hits")).items()})
    arrays["strict_masks"] = strict_masks(torch.from_numpy(q_lab[:40]), torch.from_numpy(g_lab[:60])).numpy()
    check_arrays("retrieval.npz", arrays)
    check_json("retrieval.json", {key: _evaluation_numbers(ev) for key, ev in chunked.items()})


def _loss_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(0)
    labels = torch.from_numpy(three_level_labels(rng, 24))
    t = torch.from_numpy(rng.standard_normal((3, 24, 4))).to(dtype)  # three cells sharing one batch
    return labels, t


def _geometries() -> dict[str, Geometry]:
    return {"euclidean": Euclidean(), "poincare": Poincare(c=1.0, r=2.0)}


LOSS_CASES = ("regression", "regression_targets", "supcon", "supcon_weighted", "supcon_no_leaf")


def _loss(case: str, dist: torch.Tensor, labels: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    if case == "regression":
        return losses.regression_loss(dist, labels)
    if case == "regression_targets":
        return losses.regression_loss(dist, labels, targets=(0.1, 0.3, 0.9, 1.5))
    if case == "supcon":
        return losses.taxonomy_supcon_loss(dist, labels, tau)
    if case == "supcon_weighted":
        return losses.taxonomy_supcon_loss(dist, labels, 0.3, weights=(0.5, 1.0, 2.0))
    assert case == "supcon_no_leaf"
    return losses.taxonomy_supcon_loss(dist, labels, tau, weights=(0.0, 1.0, 1.0))


def test_losses_values_and_gradients() -> None:
    arrays: dict[str, np.ndarray] = {}
    for dtype in (torch.float32, torch.float64):
        labels, t0 = _loss_inputs(dtype)
        tau = torch.tensor([0.1, 0.2, 0.5], dtype=dtype)
        for gname, geometry in _geometries().items():
            for name in LOSS_CASES:
                t = t0.clone().requires_grad_(True)
                dist = geometry.pairwise(geometry.embed(t), clip_max=TRAIN_CLIP)
                value = _loss(name, dist, labels, tau)
                value.sum().backward()
                assert t.grad is not None
                key = f"{gname}.{str(dtype).removeprefix('torch.')}.{name}"
                arrays[f"{key}.value"] = value.detach().numpy()
                arrays[f"{key}.grad"] = t.grad.numpy()
            # the distances are left out to keep the goldens small: the gradient passes through them
    check_arrays("losses.npz", arrays)


def test_fused_values_and_gradients() -> None:
    arrays: dict[str, np.ndarray] = {}
    for dtype in (torch.float32, torch.float64):
        labels, t = _loss_inputs(dtype)
        tau = torch.tensor([0.1, 0.2, 0.5], dtype=dtype)
        targets = fused.BatchTargets.build(
            labels, dtype, targets=(0.2, 0.5, 0.8, 1.0), level_weights=(1.0, 0.5, 2.0), host_labels=labels
        )
        for gname, geometry in _geometries().items():
            assert fused.supported(geometry)
            d, back = fused.embed_and_distances(geometry, t, TRAIN_CLIP)
            reg, reg_grad = fused.regression_value_grad(d, targets)
            sup, sup_grad = fused.supcon_value_grad(d, tau, targets)
            key = f"{gname}.{str(dtype).removeprefix('torch.')}"
            arrays.update(
                {
                    f"{key}.dist": d.numpy(),
                    f"{key}.regression": reg.numpy(),
                    f"{key}.regression_grad_t": back(reg_grad).numpy(),
                    f"{key}.supcon": sup.numpy(),
                    f"{key}.supcon_grad_t": back(sup_grad).numpy(),
                }
            )
        assert targets.regression_target is not None and targets.supcon_weight is not None
        arrays[f"targets.{str(dtype).removeprefix('torch.')}.regression"] = targets.regression_target.numpy()
        arrays[f"targets.{str(dtype).removeprefix('torch.')}.supcon_weight"] = targets.supcon_weight.numpy()
    check_arrays("fused.npz", arrays)


# -- the store's schema --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["schema", "views"])
def test_store_schema_snapshot(name: str) -> None:
    snapshot = ROOT / "tests" / "stores" / f"{name}_v{SCHEMA_VERSION}.sql"
    current = (ROOT / "store" / f"{name}.sql").read_bytes()
    if writing():
        snapshot.write_bytes(current)
        return
    assert snapshot.is_file(), (
        f"store/{name}.sql of schema version {SCHEMA_VERSION} has no snapshot {snapshot.relative_to(ROOT)}: "
        "a new version keeps the old snapshots and adds its own (python -m tests.golden.capture)"
    )
    assert current == snapshot.read_bytes(), (
        f"store/{name}.sql differs from {snapshot.relative_to(ROOT)} while SCHEMA_VERSION is still "
        f"{SCHEMA_VERSION}: a change to the store's schema bumps the version and adds a migration"
    )


# -- a trained study through the CLI -------------------------------------------------------------------------
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?")


def _cli(home: Path, *args: str, cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert done.returncode == 0, f"hierconsole {' '.join(args)} failed ({done.returncode}): {done.stderr}"


def _masked(data: bytes, study: str, lock: str, folders: list[Path]) -> bytes:
    """The bytes with what differs between two trainings of the same study masked: its id (a time and a
    random suffix), the lock hash (which covers the id), timestamps and the test's folders."""
    text = (
        data.decode("utf-8").replace(study, "<study>").replace(lock, "<lock>").replace(lock[:12], "<lock12>")
    )
    for folder in folders:
        text = text.replace(str(folder), "<folder>")
    return TIMESTAMP.sub("<time>", text).encode("utf-8")


@pytest.mark.slow
def test_trained_study_exports_and_report(trained_baselines: TrainedStudy, tmp_path: Path) -> None:
    home = copy_home(trained_baselines.home, tmp_path / "home")
    out = tmp_path / "out"
    out.mkdir()
    with Store(home, read_only=True) as store:
        study, lock = store.rows("SELECT study_id, lock_sha256 FROM studies")[0]
    for table in TABLES:
        _cli(home, "export", table, "--study", study, "-o", str(out / f"{table}.csv"), cwd=out)
    _cli(home, "report", study, "-o", str(out / "report.md"), cwd=out)
    shas = {}
    folders = [out, home, trained_baselines.home, tmp_path]
    for name in [*(f"{t}.csv" for t in TABLES), "report.md"]:
        data = _masked((out / name).read_bytes(), study, lock, folders)
        shas[name] = sha256(data)
        check_file_bytes(f"study/{name}", data)
    check_json("study/sha256.json", shas)
