"""A preset's level options (issue 41): their form checked as the preset is read, their levels resolved
against the dataset's (`config.level_plan`), and a launch that refuses what does not fit with one line
naming the option, the value and the dataset's levels, before anything is created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hierconsole.config import load_preset
from hierconsole.config.level_plan import (
    check_levels,
    level_weights,
    regression_targets,
    resolve_plan,
    selection_score,
)
from hierconsole.datasets import FeatureSet
from hierconsole.errors import ConfigError
from hierconsole.levels import LevelError, LevelPlan, Levels, default_regression_targets
from tests.reliability.conftest import one_line_error, tree_digest
from tests.stores.real import cli, registered_home

CUB = Levels.of(("Class", "Genus", "Family"))
INAT = Levels.of(("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom"))
TWO = Levels.of(("Leaf", "Group"))


def demo(**values: Any) -> Any:
    return load_preset("demo").with_overrides(values=values)


def plan_of(preset: Any, levels: Levels) -> LevelPlan:
    return resolve_plan(preset, levels)


# --- parse time: the form only --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("training.level_weights", [1.0], "has 1 items"),
        ("training.level_weights", [1.0] * 13, "2 to 12 values"),
        ("training.level_weights", [1.0, -1.0], "item 1 = -1.0"),
        ("training.regression_targets", [0.2, 1.0], "3 to 13 values"),
        ("training.regression_targets", [0.2, 0.5, 0.5, 1.0], "not strictly increasing"),
        ("evaluation.hier_levels", [], "is empty"),
        ("evaluation.hier_levels", ["high", "high"], "repeats"),
        ("evaluation.hier_levels", [13], "out of range"),
        ("training.levels", [0], "out of range"),
        ("split.level", "", "a level: its code"),
        ("training.selection_score", "Genus mAP", "'{code}_mAP'"),
    ],
)
def test_form_is_checked_when_the_preset_is_read(key: str, value: Any, fragment: str) -> None:
    extra = {"training.select_epoch": True} if key == "training.selection_score" else {}
    with pytest.raises(ConfigError) as info:
        demo(**{key: value, **extra})
    assert key in str(info.value) and fragment in str(info.value), str(info.value)


def test_variable_length_lists_are_read_at_any_depth() -> None:
    p = demo(**{
        "training.level_weights": [1, 2, 3, 4, 5, 6, 7],
        "training.regression_targets": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0],
    })  # fmt: skip
    assert p.training.level_weights == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)
    assert len(p.training.regression_targets) == 8


def test_new_options_are_left_out_of_the_document_until_set() -> None:
    """An unset new option leaves the preset's document (and hash) as it was; a set one is in it, and the
    document reads back to the same preset (a study's recorded preset)."""
    base = load_preset("demo")
    assert "hier_levels" not in base.to_dict()["evaluation"]
    assert "levels" not in base.to_dict()["training"]
    p = demo(**{"evaluation.hier_levels": ["high", 2], "training.levels": "[leaf, 2]"})
    assert p.evaluation.hier_levels == ("high", "2")
    assert p.training.levels == ("leaf", "2")
    assert p.to_dict()["evaluation"]["hier_levels"] == ["high", "2"]
    assert p.sha256() != base.sha256()
    from hierconsole.config import Preset

    assert Preset.from_dict(p.to_dict(), recorded=True) == p


# --- resolution against the dataset's levels -------------------------------------------------------------


def test_default_plan_is_every_level_trained_and_every_level_above_the_leaf_in_the_hier_score() -> None:
    for levels in (CUB, INAT, TWO):
        plan = plan_of(load_preset("demo"), levels)
        assert plan == LevelPlan.default(levels)


@pytest.mark.parametrize(
    ("refs", "levels", "codes"),
    [
        (["high"], CUB, ("high",)),
        (["Family", "genus"], CUB, ("middle", "high")),  # display names, any case, in level order
        ([3, 2], CUB, ("middle", "high")),  # numbers
        (["kingdom", "Genus", 4], INAT, ("genus", "order", "kingdom")),
        (["group"], TWO, ("group",)),
    ],
)
def test_hier_levels_resolve_codes_names_and_numbers(
    refs: list[Any], levels: Levels, codes: tuple[str, ...]
) -> None:
    assert plan_of(demo(**{"evaluation.hier_levels": refs}), levels).hier == codes


@pytest.mark.parametrize(
    ("refs", "levels", "codes"),
    [
        (["leaf", "middle"], CUB, ("leaf", "middle")),
        (["Class", 2], CUB, ("leaf", "middle")),
        (["species", "Genus", 3], INAT, ("species", "genus", "family")),
        ([1, 2], TWO, ("leaf", "group")),
    ],
)
def test_training_levels_resolve_codes_names_and_numbers(
    refs: list[Any], levels: Levels, codes: tuple[str, ...]
) -> None:
    assert plan_of(demo(**{"training.levels": refs}), levels).trained == codes


def test_training_on_the_leaf_alone_is_refused() -> None:
    # One level has no hierarchy to learn, and regression would have no targets between its two relations.
    with pytest.raises(ValueError, match="the leaf and at least one level above it"):
        plan_of(demo(**{"training.levels": [1]}), TWO)


@pytest.mark.parametrize(
    ("key", "value", "levels", "fragments"),
    [
        ("evaluation.hier_levels", ["leaf"], CUB, ["never counts the leaf level leaf (Class)"]),
        ("evaluation.hier_levels", ["Class"], CUB, ["never counts the leaf level"]),
        ("evaluation.hier_levels", ["order"], CUB, ["no level 'order'"]),
        ("evaluation.hier_levels", [8], INAT, ["no level '8'"]),
        ("evaluation.hier_levels", ["genus", 2], INAT, ["names level genus twice"]),
        ("training.levels", ["genus", "family"], INAT, ["leaves out the leaf level species"]),
        ("training.levels", ["leaf", "phylum"], CUB, ["no level 'phylum'"]),
        # A skipped level: training's strict positives above the gap would not be evaluation's.
        ("training.levels", ["Class", 3], CUB, ["a run of levels from the leaf up", "none skipped"]),
        (
            "training.levels",
            ["species", "genus", "order"],
            INAT,
            ["(species, genus, family), got species, genus, order"],
        ),
    ],
)
def test_unresolvable_levels_name_the_option_value_and_the_datasets_levels(
    key: str, value: list[Any], levels: Levels, fragments: list[str]
) -> None:
    with pytest.raises(LevelError) as info:
        plan_of(demo(**{key: value}), levels)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{key} = ")
    assert f"the dataset's levels are {levels.describe()}" in msg
    for fragment in fragments:
        assert fragment in msg, msg


def test_uniform_weights_broadcast_to_the_trained_depth() -> None:
    for weights in ([1.0, 1.0, 1.0], [2.0, 2.0], [0.5] * 12):
        p = demo(**{"training.level_weights": weights})
        assert level_weights(p, plan_of(p, INAT)) == (weights[0],) * 7
        assert level_weights(p, plan_of(p, TWO)) == (weights[0],) * 2
    p = demo(**{"training.level_weights": [1, 1], "training.levels": ["species", "genus", "family"]})
    assert level_weights(p, plan_of(p, INAT)) == (1.0, 1.0, 1.0)


def test_non_uniform_weights_give_one_per_trained_level() -> None:
    p = demo(**{"training.level_weights": [0.25, 0.5, 1.0]})
    assert level_weights(p, plan_of(p, CUB)) == (0.25, 0.5, 1.0)
    p = demo(**{"training.level_weights": [0.25, 0.5, 1.0], "training.levels": [1, 2, 3]})
    assert level_weights(p, plan_of(p, INAT)) == (0.25, 0.5, 1.0)
    with pytest.raises(LevelError) as info:
        level_weights(p, plan_of(demo(**{"training.level_weights": [0.25, 0.5, 1.0]}), INAT))
    msg = str(info.value)
    assert msg.startswith("training.level_weights = [0.25, 0.5, 1.0]: 3 weights for 7 trained levels")
    assert INAT.describe() in msg


def test_regression_targets_default_follows_the_depth_and_others_need_k_plus_one() -> None:
    p = load_preset("demo")
    assert regression_targets(p, plan_of(p, CUB)) == (0.2, 0.5, 0.8, 1.0)
    assert regression_targets(p, plan_of(p, INAT)) == default_regression_targets(7)
    assert regression_targets(p, plan_of(p, TWO)) == default_regression_targets(2)
    p = demo(**{"training.regression_targets": [0.1, 0.9, 1.0]})
    assert regression_targets(p, plan_of(p, TWO)) == (0.1, 0.9, 1.0)
    with pytest.raises(LevelError) as info:
        regression_targets(p, plan_of(p, CUB))
    assert "3 targets for 3 trained levels" in str(info.value) and "give 4" in str(info.value)


def test_selection_score_names_a_level_code_of_the_dataset() -> None:
    select = {"training.select_epoch": True}
    assert selection_score(demo(**select, **{"training.selection_score": "genus_mAP"}), INAT) == "genus_mAP"
    assert selection_score(demo(**select), INAT) == "hier_mAP"
    p = demo(**select, **{"training.selection_score": "genus_mAP"})
    with pytest.raises(LevelError, match="no level 'genus'"):
        selection_score(p, CUB)
    with pytest.raises(LevelError, match="no level 'genus'"):
        check_levels(p, CUB)


def test_every_shipped_preset_fits_three_levels() -> None:
    from hierconsole.config import list_presets
    from hierconsole.config.family import list_families, load_family

    for name, _, _ in list_presets():
        assert check_levels(load_preset(name), CUB) == LevelPlan.default(CUB)
    for name, _, _ in list_families():
        for member in load_family(name).members:
            check_levels(member.preset, CUB)


# --- the launch: refused before anything is created -------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, tiny_fs: FeatureSet) -> Path:
    return registered_home(tmp_path / "home", tiny_fs)


LAUNCH = ["run", "demo", "--dataset", "tiny", "--set", "evaluation.n_query=32", "--dry-run"]


DISJOINT = ("split.protocol=hierarchy_disjoint", "split.fractions=[0.6,0.2,0.2]")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (
            ("training.level_weights=[1,2]",),
            ["training.level_weights = [1.0, 2.0]", "2 weights for 3 trained levels"],
        ),
        (
            ("evaluation.hier_levels=[leaf]",),
            ['evaluation.hier_levels = ["leaf"]', "never counts the leaf level"],
        ),
        (("training.regression_targets=[0.1,0.9,1.0]",), ["training.regression_targets", "give 4"]),
        (("training.levels=[middle,high]",), ["training.levels", "leaves out the leaf level leaf"]),
        (("training.levels=[leaf,high]",), ['training.levels = ["leaf", "high"]', "none skipped"]),
        ((*DISJOINT, "split.level=Leaf"), ["split.level = 'Leaf' is the leaf level"]),
    ],
)
def test_launch_refuses_levels_that_do_not_fit_the_dataset(
    home: Path, overrides: tuple[str, ...], fragments: list[str]
) -> None:
    before = tree_digest(home)
    sets = [arg for override in overrides for arg in ("--set", override)]
    for args in (LAUNCH, LAUNCH[:-1]):  # a dry run and a real one
        msg = one_line_error(cli(home, *args, *sets))
        assert "dataset 'tiny'" in msg
        for fragment in fragments:
            assert fragment in msg, msg
        assert "the dataset's levels are 1 leaf, 2 middle, 3 high" in msg, msg
    assert tree_digest(home) == before


@pytest.mark.slow
def test_launch_accepts_levels_that_fit(home: Path) -> None:
    done = cli(
        home, *LAUNCH, "--set", "evaluation.hier_levels=[high]", "--set", "training.level_weights=[2,2]"
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_three_level_expected_counts_are_refused_on_a_deeper_tree(tmp_path: Path) -> None:
    """The expected_counts audit counts a deep tree's groups by their own codes: a preset declaring the
    three-level counts would pass the launch and fail its audit, so the launch refuses them."""
    home = tmp_path / "home"
    assert cli(home, "import", "synthetic", "tree5").returncode == 0
    before = tree_digest(home)
    run = ["run", "demo", "--dataset", "tree5", "--dry-run", "--set", "expected.middle_groups=3"]
    done = cli(home, *run)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    text = " ".join(done.stderr.split())
    assert "expected.middle_groups = 3: [expected] group counts are three-level" in text, text
    assert "dataset 'tree5' has 5 levels (1 species" in text and "--set expected=none" in text, text
    assert tree_digest(home) == before
    assert cli(home, *run[:-2], "--set", "expected=none").returncode == 0
