"""Figures and report sections of a K-level study (K = 2, 5, 7, 12), drawn from the demo study's inputs
with hand-made K-level results (no K-level home is trained here), and the three-level captions pinned."""

from __future__ import annotations

import dataclasses

import pytest

from hierconsole.levels import Levels
from hierconsole.present.levels import and_list
from hierconsole.present.report.document import Facts, Table
from hierconsole.present.report.figures import draw
from hierconsole.present.report.figures.style import figure_bytes
from hierconsole.present.report.study_report import family_sections, study_sections
from hierconsole.study.read.report_inputs import family_inputs, study_inputs
from tests.present.k_levels import arm_table_k, levels_k, redistribution_k
from tests.present.report.conftest import FAMILY
from tests.stores.fixed import COMPLETE


@pytest.fixture(scope="module")
def demo(report_home):
    from hierconsole.study.db.storage import Store

    with Store(report_home, read_only=True) as store:
        return study_inputs(store, COMPLETE), family_inputs(store, FAMILY)


def _deep(inputs, levels: Levels):
    """The demo study as if its tree had `levels`: mAP and Recall@K at every level, H − E per level, the
    effects of the hier score and of level 2."""
    level2 = f"{levels.codes[1]}_mAP"
    effects = {
        level2: {n: dataclasses.replace(e, metric=level2) for n, e in inputs.effects["middle_mAP"].items()},
        "hier_mAP": inputs.effects["hier_mAP"],
    }
    return dataclasses.replace(
        inputs,
        level_names=levels.names,
        levels=levels,
        hier=levels.non_leaf,
        arms=arm_table_k(levels, recall=(1, 2, 4)),
        redistribution=redistribution_k(levels),
        effects=effects,
        posthoc={},
    )


def _texts(labels) -> list[str]:
    return [t.get_text() for t in labels]


def test_three_levels_keep_their_captions(demo):
    inputs, family = demo
    assert draw("effects", inputs).axes[0].get_xlabel() == "Δ hier mAP (mean of middle and high mAP), paired by seed"
    recall = draw("recall", inputs)
    assert len(recall.axes) == 3 and recall.axes[0].get_subplotspec().get_gridspec().get_geometry() == (1, 3)
    assert recall.get_size_inches()[1] == pytest.approx(2.3)
    training = draw("training", inputs)
    if len(training.axes) > 1:
        assert training.axes[1].get_title(loc="left") == "validation (mean of middle and high mAP)"
    contrasts = draw("contrasts", family).axes[0].get_xlabel()
    assert contrasts.endswith("(levels as labelled; hier = mean of middle and high), paired by seed")
    ticks = _texts(draw("redistribution", inputs).axes[0].get_xticklabels())
    assert all(t.get_rotation() == 0 for t in draw("redistribution", inputs).axes[0].get_xticklabels())
    assert len(ticks) == 3


@pytest.mark.parametrize("k", (2, 7, 12))
def test_figures_scale_with_the_depth(demo, k):
    levels = levels_k(k)
    inputs = _deep(demo[0], levels)
    labels = [n if n.lower() == c else f"{n} ({c})" for n, c in zip(levels.names, levels.codes, strict=True)]

    fig = draw("redistribution", inputs)
    left, right = fig.axes
    assert _texts(left.get_xticklabels()) == labels == _texts(right.get_xticklabels())
    assert all((t.get_rotation() != 0) == (k > 6) for t in left.get_xticklabels())
    assert [len(c.lines[0].get_xdata()) for c in right.containers] == [k, k]  # H_S − E_S, H_R − E_R
    assert all(len(c.lines[0].get_xdata()) == k for c in left.containers)

    recall = draw("recall", inputs)
    rows = -(-k // 4)
    assert [ax.get_title(loc="left") for ax in recall.axes] == labels
    assert recall.axes[0].get_subplotspec().get_gridspec().get_geometry() == (rows, min(k, 4))

    forest = draw("effects", inputs)
    assert forest.axes[0].get_xlabel() == f"Δ hier mAP (mean of {and_list(levels.codes[1:])} mAP), paired by seed"
    level2 = draw("effects", inputs, metric=f"{levels.codes[1]}_mAP").axes[0].get_xlabel()
    assert labels[1] in level2

    for figure in (fig, recall, forest):
        assert figure_bytes(figure, "png").startswith(b"\x89PNG")


def test_report_sections_of_a_five_level_study(demo):
    levels = Levels.of(("Species", "Genus", "Family", "Order", "Class"))
    inputs = _deep(demo[0], levels)
    sections = {s.id: s for s in study_sections(inputs)}
    facts = dict(next(b for b in sections["protocol"].blocks if isinstance(b, Facts)).items)
    assert facts["levels"] == "5: Species, Genus, Family, Order, Class"
    arms = next(b for b in sections["arms"].blocks if isinstance(b, Table))
    assert arms.frame.columns == ["arm", "metric", "n", "mean", "sd"]  # long beyond four levels
    e_r = arms.frame.filter(arms.frame["arm"] == "E_R")["metric"].to_list()
    assert e_r == [*(f"{c}_mAP" for c in levels.codes), "hier_mAP"]
    effects = next(b for b in sections["effects"].blocks if isinstance(b, Table))
    assert effects.frame["metric"].unique(maintain_order=True).to_list() == ["genus_mAP", "hier_mAP"]
    redistribution = next(b for b in sections["redistribution"].blocks if isinstance(b, Table))
    assert redistribution.frame["level"].unique(maintain_order=True).to_list() == list(levels.codes)

    family = dataclasses.replace(demo[1], level_names=levels.names, levels=levels, hier=levels.non_leaf)
    contrasts = next(s for s in family_sections(family) if s.id == "contrasts")
    captions = [b.caption for b in contrasts.blocks if isinstance(b, Table)]
    assert captions and captions[0].endswith("(hier: mean of genus, family, order and class mAP)")


def test_four_levels_keep_the_wide_arms_table(demo):
    levels = Levels.of(("Species", "Genus", "Family", "Order"))
    sections = {s.id: s for s in study_sections(_deep(demo[0], levels))}
    arms = next(b for b in sections["arms"].blocks if isinstance(b, Table))
    assert arms.frame.columns[:4] == ["arm", "n", "species_mAP_mean", "species_mAP_sd"]
    assert "hier_mAP_mean" in arms.frame.columns and "order_mAP_sd" in arms.frame.columns
