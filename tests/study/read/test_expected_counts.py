"""A preset's `[expected]` counts against the realised split, on a generated NABirds-layout folder.

Every leaf has 4 official-train and 3 official-test images, so the counts of each reading follow from
the leaf counts alone: the paper's reading (development from official-train images of the development
leaves, test from official-test images of the test leaves) gives 10 x 4 = 40 development and 3 x 3 = 9
test images; pooling every image of the groups gives 10 x 7 = 70 and 3 x 7 = 21.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from hierconsole.config import load_preset
from hierconsole.datasets.nabirds import import_nabirds
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.read import audits
from hierconsole.study.run.lifecycle import create_study

N_TRAIN, N_TEST = 4, 3
# Root 0; Supergroups 1-3; Parents 10-18 (three under each); Parents 10-13 hold two leaves, 14-18 one.
PARENTS = {10 + i: 1 + i // 3 for i in range(9)}
LEAVES = {100 + 2 * i + k: 10 + i for i in range(9) for k in range(2 if i < 4 else 1)}


def write_nabirds(root: Path) -> Path:
    """A NABirds folder in its file formats (classes, hierarchy, images, labels, split) and features."""
    rng = np.random.default_rng(3)
    root.mkdir(parents=True)
    nodes = {0: "Birds", **{s: f"Group {s}" for s in (1, 2, 3)}}
    nodes |= {p: f"Parent {p}" for p in PARENTS} | {c: f"Leaf {c}" for c in LEAVES}
    edges = [(s, 0) for s in (1, 2, 3)] + list(PARENTS.items()) + list(LEAVES.items())
    ids, rows = [], []
    for cid in LEAVES:
        for k in range(N_TRAIN + N_TEST):
            ids.append(str(uuid.UUID(int=int(rng.integers(1 << 62)))))
            rows.append((ids[-1], cid, 1 if k < N_TRAIN else 0))

    def put(name: str, lines: list[str]) -> None:
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")

    put("classes.txt", [f"{c} {n}" for c, n in nodes.items()])
    put("hierarchy.txt", [f"{c} {p}" for c, p in edges])
    put("images.txt", [f"{i} {c:04d}/{i.replace('-', '')}.jpg" for i, c, _ in rows])
    put("image_class_labels.txt", [f"{i} {c}" for i, c, _ in rows])
    put("train_test_split.txt", [f"{i} {t}" for i, _, t in rows])
    feats = root.parent / "features.npz"
    np.savez(feats, features=rng.standard_normal((len(ids), 8)).astype(np.float32), ids=np.array(ids))
    return feats


EXPECTED = {
    "development_images": 40,
    "test_images": 9,
    "query_images": 3,
    "gallery_images": 6,
    "tuning_fit_images": 28,
    "tuning_query_images": 3,
    "tuning_gallery_images": 9,
    "updates_per_epoch": 5,  # floor(40 / 8) with drop_last
    "leaves": 13,
    "middle_groups": 9,
    "high_groups": 3,
    "part_leaves": [7, 3, 3],
    "part_middle_groups": [5, 2, 2],
}


def preset(images: str, **expected):
    values = {
        "data.dataset": "nabirds",
        "split.protocol": "hierarchy_disjoint",
        "split.level": "middle",
        "split.counts": [5, 2, 2],
        "split.leaf_counts": [7, 3, 3],
        "split.images": images,
        "evaluation.n_query": 3,
        "temperature.tuning.n_query": 3,
        "training.batch_size": 8,
        # The demo's pca baseline cannot project 8-D features to 32 axes (refused at creation).
        "evaluation.baselines": ["frozen"],
        **{f"expected.{k}": v for k, v in {**EXPECTED, **expected}.items()},
    }
    return load_preset("demo").with_overrides(values=values)


@pytest.fixture
def store(tmp_path):
    feats = write_nabirds(tmp_path / "nabirds")
    with Store(tmp_path / "home") as s:
        register_dataset(s, import_nabirds(tmp_path / "nabirds", feats))
        yield s


def expected_check(store: Store, study_id: str) -> audits.Check:
    return audits.expected_counts(store, study_id)


def test_the_papers_reading_meets_every_declared_count(store):
    study = create_study(store, preset("official"), "nabirds")
    assert audits.realised_counts(store, study) == EXPECTED
    check = expected_check(store, study)
    assert check.ok is True, check
    assert check.evidence.startswith("13 of 13 declared counts match")


def test_a_pooled_split_fails_naming_each_count(store):
    study = create_study(store, preset("all"), "nabirds")
    check = expected_check(store, study)
    assert check.ok is False
    for text in (
        "development_images is 70, expected 40",
        "test_images is 21, expected 9",
        "updates_per_epoch is 8, expected 5",
        "tuning_fit_images is 49, expected 28",
    ):
        assert text in check.evidence, (text, check.evidence)
    # Leaves and groups per part are the same in both readings: they are not offenders.
    assert "part_leaves" not in check.evidence.split(";", 1)[1]


def test_one_wrong_declaration_fails_and_undeclared_counts_are_skipped(store):
    wrong = preset("official", part_leaves=[6, 4, 3], gallery_images="none")
    study = create_study(store, wrong, "nabirds")
    check = expected_check(store, study)
    assert check.ok is False
    assert "part_leaves is [7, 3, 3], expected [6, 4, 3]" in check.evidence
    assert "11 of 12 declared counts match" in check.evidence and "gallery_images" not in check.evidence


def test_a_preset_without_expected_counts_passes_saying_so(store):
    plain = load_preset("demo").with_overrides(
        values={
            "data.dataset": "nabirds",
            "evaluation.n_query": 3,
            "evaluation.baselines": ["frozen"],
            "training.batch_size": 8,
        }
    )
    study = create_study(store, plain, "nabirds")
    check = expected_check(store, study)
    assert check.ok is True and "declares no expected counts" in check.evidence


@pytest.mark.slow  # the CLI in a subprocess
def test_unreachable_split_targets_are_refused_before_anything_is_created(tmp_path):
    from tests.reliability.conftest import cli, one_line_error, tree_digest

    feats = write_nabirds(tmp_path / "nabirds")
    home = tmp_path / "home"
    with Store(home) as s:
        register_dataset(s, import_nabirds(tmp_path / "nabirds", feats))
    before = tree_digest(home)
    flags = ["--set", "split.protocol='hierarchy_disjoint'", "--set", "split.counts=[5, 2, 2]"]
    flags += ["--set", "split.images='official'", "--set", "evaluation.n_query=3", "--epochs", "1"]
    flags += ["--set", "training.batch_size=8", "--set", 'evaluation.baselines=["frozen"]']
    text = one_line_error(
        cli(home, "run", "demo", "--dataset", "nabirds", *flags, "--set", "split.leaf_counts=[10, 2, 1]")
    )
    assert "no assignment of the 9 middle groups meets the split targets (closest: leaves" in text
    assert "--set split.leaf_counts=none" in text
    assert tree_digest(home) == before and not (home / "studies").exists()


@pytest.mark.slow  # the CLI in a subprocess, one short training run
def test_run_warns_before_training_when_the_split_differs(tmp_path):
    from tests.reliability.conftest import cli

    feats = write_nabirds(tmp_path / "nabirds")
    home = tmp_path / "home"
    with Store(home) as s:
        register_dataset(s, import_nabirds(tmp_path / "nabirds", feats))
    values = {k: v for k, v in preset("all").to_dict()["split"].items() if v is not None}
    flags = [f"split.{k}={v!r}" if isinstance(v, str) else f"split.{k}={v}" for k, v in values.items()]
    flags += [f"expected.{k}={v}" for k, v in EXPECTED.items()]
    flags += [
        "evaluation.n_query=3",
        "temperature.tuning.n_query=3",
        "training.batch_size=8",
        'evaluation.baselines=["frozen"]',
        "compute.device='cpu'",
    ]
    done = cli(home, "run", "demo", "--dataset", "nabirds", "--epochs", "1", "--seeds", "42",
               *[a for f in flags for a in ("--set", f)])  # fmt: skip
    out = " ".join(done.stdout.split())
    before_training = out.split("final-s42")[0]
    assert "warning: expected_counts: 7 of 13 declared counts match" in before_training, out
    assert "development_images is 70, expected 40" in before_training
    assert done.returncode == 1  # the stored audit fails too
