"""Level codes, display names and references for taxonomies of 2 to 12 levels."""

import pytest

from hierconsole.levels import (
    PAPER_CODES,
    LevelError,
    LevelPlan,
    Levels,
    default_hier,
    default_level_names,
    default_regression_targets,
    level_codes,
)
from hierconsole.vocabulary import CUB_LEVEL_NAMES, NABIRDS_LEVEL_NAMES

INAT = ("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom")


def test_three_levels_keep_the_paper_codes_whatever_their_names():
    for names in (CUB_LEVEL_NAMES, NABIRDS_LEVEL_NAMES, ("species", "genus", "family"), ("a", "a", "a")):
        assert level_codes(names) == PAPER_CODES
    assert Levels.of(CUB_LEVEL_NAMES).is_paper


def test_other_depths_take_codes_from_their_names():
    levels = Levels.of(INAT)
    assert levels.codes == ("species", "genus", "family", "order", "class", "phylum", "kingdom")
    assert levels.k == 7 and levels.leaf == "species" and levels.top == "kingdom"
    assert levels.non_leaf == levels.codes[1:] and not levels.is_paper
    assert Levels.of(("Leaf node", "Super-group")).codes == ("leafnode", "supergroup")


@pytest.mark.parametrize(
    "names",
    [
        ("A", "a", "B", "C"),  # two names make one code
        ("species", "hier", "x", "y"),  # the hier score's name
        ("1st", "b", "c", "d"),  # a code starts with a letter
        ("", "b", "c", "d"),
        ("genus_x", "genus x", "c", "d"),
    ],
)
def test_names_that_do_not_make_distinct_codes_fall_back_to_numbers(names):
    assert level_codes(names) == ("l1", "l2", "l3", "l4")


@pytest.mark.parametrize("k", [0, 1, 13])
def test_depth_is_two_to_twelve(k):
    with pytest.raises(LevelError, match="2 to 12 levels"):
        level_codes([f"n{i}" for i in range(k)])


def test_a_level_is_found_by_code_name_or_number():
    levels = Levels.of(INAT)
    assert (
        levels.resolve("genus")
        == levels.resolve("GENUS")
        == levels.resolve(2)
        == levels.resolve("2")
        == "genus"
    )
    cub = Levels.of(CUB_LEVEL_NAMES)
    assert cub.resolve("Genus") == cub.resolve("middle") == "middle"
    assert cub.name("high") == "Family"
    with pytest.raises(
        LevelError, match=r"no level 'tribe': the levels are 1 leaf \(Class\), 2 middle \(Genus\)"
    ):
        cub.resolve("tribe")
    with pytest.raises(LevelError, match="no level 8"):
        levels.index(8)


def test_edge_keys_name_child_then_parent():
    assert Levels.of(CUB_LEVEL_NAMES).edges == ("leaf_middle", "middle_high")
    assert Levels.of(INAT).edges[-1] == "phylum_kingdom"


def test_default_targets_are_the_papers_for_three_levels_bit_for_bit():
    assert default_regression_targets(3) == (0.2, 0.5, 0.8, 1.0)
    assert default_regression_targets(2) == (0.2, 0.8, 1.0)
    t = default_regression_targets(12)
    assert len(t) == 13 and t[0] == 0.2 and abs(t[11] - 0.8) < 1e-15 and t[12] == 1.0
    assert all(a < b for a, b in zip(t, t[1:], strict=False))


def test_default_names_and_hier():
    assert default_level_names(3) == ("Leaf", "Middle", "High")
    assert default_level_names(5) == tuple(f"Level {i}" for i in range(1, 6))
    assert Levels.default(5).codes == ("level1", "level2", "level3", "level4", "level5")
    assert default_hier(Levels.of(INAT)) == Levels.of(INAT).codes[1:]


def test_a_plan_checks_its_levels():
    levels = Levels.of(INAT)
    plan = LevelPlan.default(levels)
    assert plan.trained == levels.codes and plan.hier == levels.codes[1:]
    assert LevelPlan(levels, ("genus", "family"), ("species", "genus", "family")).trained_index == (0, 1, 2)
    with pytest.raises(LevelError, match="never counts the leaf"):
        LevelPlan(levels, ("species",), levels.codes)
    with pytest.raises(LevelError, match="needs the leaf level"):
        LevelPlan(levels, ("genus",), ("genus", "family"))
    with pytest.raises(LevelError, match="not in"):
        LevelPlan(levels, ("tribe",), levels.codes)
    with pytest.raises(LevelError, match="at least one level above it"):
        LevelPlan(levels, ("genus",), ("species",))
    with pytest.raises(LevelError, match="in order"):
        LevelPlan(levels, ("genus",), ("species", "family", "genus"))
    with pytest.raises(LevelError, match="from the leaf up, in order with none skipped"):
        LevelPlan(levels, ("genus",), ("species", "family"))


def test_only_the_level_rooms_spell_the_three_level_codes():
    """Levels come from the data: outside these modules no code names `middle` or `high` as a string."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "hierconsole"
    allowed = {
        "levels.py",  # the codes of every three-level taxonomy
        "config/preset.py",  # split.level's default, documented as level 2 on other trees
        "datasets/splits.py",  # the rule that reads that default on trees of another depth
    }
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ("middle", "high"):
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, "three-level codes spelled outside the level rooms: " + "; ".join(found)


@pytest.mark.parametrize("names", [("Leaf", "Middle"), ("leaf", "high"), ("Middle", "High", "Leaf", "high ")])
def test_other_depths_never_take_only_paper_codes(names):
    # Level columns named only leaf/middle/high are a three-level table's (one may lack an empty level).
    codes = level_codes(names)
    assert not set(codes) <= set(PAPER_CODES)
    assert codes == tuple(f"l{i}" for i in range(1, len(names) + 1))


def test_a_deep_tree_may_share_a_paper_code():
    assert Levels.of(("Leaf", "Group")).codes == ("leaf", "group")
    assert Levels.of(("Leaf", "Middle", "High", "Top")).codes == ("leaf", "middle", "high", "top")
