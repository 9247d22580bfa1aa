"""Group counts and fractions as two forms of one split option, `--set expected=none`, and the fit of a
preset's counts to a dataset (the refusal's proposals checked against simple references)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hierconsole.config import load_preset
from hierconsole.config.preset import DEFAULT_SPLIT_FRACTIONS
from hierconsole.datasets import import_generic
from hierconsole.datasets.preset_fit import fractions_of, misfits, refusal
from hierconsole.datasets.splits import hierarchy_disjoint_split
from hierconsole.errors import ConfigError
from tests.generic_files import write_generic


def test_fractions_replace_counts_and_counts_replace_fractions():
    nabirds = load_preset("nabirds-parent-disjoint")
    assert nabirds.split.counts == (242, 81, 81)
    by_share = nabirds.with_overrides(values={"split.fractions": [0.5, 0.25, 0.25]})
    assert by_share.split.counts is None and by_share.split.fractions == (0.5, 0.25, 0.25)
    back = by_share.with_overrides(values={"split.counts": [2, 1, 1]})
    assert back.split.fractions is None and back.split.counts == (2, 1, 1)
    # Both at once is still the user's contradiction to resolve.
    with pytest.raises(ConfigError, match="exactly one of split.counts or split.fractions"):
        nabirds.with_overrides(values={"split.counts": [2, 1, 1], "split.fractions": [0.5, 0.25, 0.25]})


def test_expected_none_clears_every_expected_count_and_only_that_table_clears():
    nabirds = load_preset("nabirds-parent-disjoint")
    assert nabirds.expected.declared()
    assert nabirds.with_overrides(values={"expected": "none"}).expected.declared() == {}
    with pytest.raises(ConfigError, match=r'training = "none" \(a string\): expected a table'):
        nabirds.with_overrides(values={"training": "none"})


@pytest.mark.parametrize("counts", [(242, 81, 81), (7, 3, 2), (1, 1, 1), (50, 30, 20), (1, 1, 400)])
def test_proposed_fractions_sum_to_one_and_round_the_shares(counts):
    shares = fractions_of(counts)
    assert abs(sum(shares) - 1) < 1e-12 and min(shares) > 0
    for share, c in zip(shares, counts, strict=True):
        assert abs(share - c / sum(counts)) <= 0.02 + 1e-12
    # What the refusal proposes is a valid preset value.
    load_preset("nabirds-parent-disjoint").with_overrides(values={"split.fractions": shares})
    assert fractions_of((242, 81, 81)) == [0.6, 0.2, 0.2]


def test_the_default_fractions_are_the_presets_one_definition():
    labels = np.array([[g, g, 0] for g in range(10)])
    split = hierarchy_disjoint_split(labels, seed=0)
    assert split.params["counts"] == [round(f * 10) for f in DEFAULT_SPLIT_FRACTIONS]


def _dataset(tmp_path: Path, *, split_column: bool = True):
    files = write_generic(tmp_path)
    if not split_column:
        rows = files.labels.read_text().splitlines()
        files.labels.write_text("\n".join(["id,leaf", *(",".join(r.split(",")[:2]) for r in rows[1:])]) + "\n")
    return import_generic(files.features, files.labels, files.taxonomy, name="mine")


def test_a_dataset_without_official_test_images_is_told_to_pool(tmp_path):
    fs = _dataset(tmp_path, split_column=False)
    preset = load_preset("nabirds-parent-disjoint").with_overrides(
        values={"split.fractions": [0.6, 0.2, 0.2], "split.leaf_counts": "none", "expected": "none"}
    )
    found = misfits(preset, fs, "mine")
    assert [m.key for m in found] == ["split.images"]
    assert "has no official test images" in found[0].problem and found[0].override == "--set split.images=all"
    pooled = preset.with_overrides(values={"split.images": "all"})
    (images,) = misfits(pooled, fs, "mine")
    assert images.key == "split.image_counts" and "has 312 images" in images.problem


def test_a_fitting_preset_has_no_misfits_and_a_refusal_lists_all(tmp_path):
    fs = _dataset(tmp_path)
    assert misfits(load_preset("demo"), fs, "mine") == []
    found = misfits(load_preset("cub"), fs, "mine")
    assert [m.key for m in found] == ["expected"]
    text = refusal(found + found)
    assert text.splitlines()[-1] == "all of them: --set expected=none --set expected=none"
    assert refusal(found).count("\n") == 0
