"""One vocabulary: each domain word is defined once (hierconsole.vocabulary) and used by name elsewhere."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pytest

from hierconsole import vocabulary as v
from hierconsole.contract.events import EventKind
from hierconsole.levels import PAPER_LEVELS, Levels

PACKAGE = Path(v.__file__).resolve().parent
DEFINING = {PACKAGE / "vocabulary.py", PACKAGE / "contract" / "events.py"}
"""The modules that define domain words: only there may they be spelled out."""

GROUPS: dict[str, set[str]] = {
    "job states": set(v.JobState),
    "study phases": set(v.Phase),
    "job kinds": set(v.JobKind),
    "arms": set(v.ARMS),
    "geometries": set(v.GEOMETRIES),
    "losses": set(v.LOSSES),
    "aggregations": set(v.AGGREGATIONS),
    "event kinds": set(EventKind),
    "the hier score": {v.HIER_METRIC},
}
WORDS: set[str] = set().union(*GROUPS.values())


def test_hier_score_is_the_mean_of_middle_and_high_map_only():
    hier = PAPER_LEVELS.non_leaf
    assert v.hier_score({"leaf": 0.9, "middle": 0.25, "high": 0.5}, hier) == 0.375
    assert v.hier_score({"middle": 0.25, "high": None}, hier) == 0.25  # a level without valid queries is left out
    assert v.hier_score({"middle": math.nan, "high": 0.5}, hier) == 0.5
    assert math.isnan(v.hier_score({"leaf": 0.9}, hier))
    rng = np.random.default_rng(0)
    for middle, high in rng.random((200, 2)):
        assert v.hier_score({"middle": middle, "high": high}, hier) == (middle + high) / 2  # bit for bit


def test_hier_score_of_declared_levels_adds_in_level_order():
    levels = Levels.of(("Species", "Genus", "Family", "Order", "Class"))
    rng = np.random.default_rng(1)
    for values in rng.random((100, 5)):
        maps = dict(zip(levels.codes, values.tolist(), strict=True))
        total = 0.0
        for code in levels.non_leaf:  # the plain sequential sum, level by level
            total += maps[code]
        assert v.hier_score(maps, levels.non_leaf) == total / 4
        assert v.hier_score(maps, ("family", "class")) == (maps["family"] + maps["class"]) / 2
    assert v.hier_score({"genus": None, "order": 0.5}, ("genus", "order")) == 0.5


def test_arms_are_the_geometry_by_loss_factorial():
    pairs = {v.arm_parts(arm) for arm in v.ARMS}
    assert pairs == {(g, loss) for g in v.GEOMETRIES for loss in v.LOSSES}
    assert all(v.arm_name(*v.arm_parts(arm)) == arm for arm in v.ARMS)
    with pytest.raises(ValueError, match="unknown arm"):
        v.arm_parts("E_X")


def test_the_engine_implements_every_optimiser_and_schedule_a_preset_may_name():
    from hierconsole.engine import optim

    assert set(optim.OPTIMIZERS) == set(v.OPTIMIZERS)
    assert set(optim.LR_SCHEDULES) == set(v.LR_SCHEDULES)


def _restatements(path: Path) -> list[str]:
    """Places in one module that spell a domain word out where it should be imported."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    quoted = re.compile(r"'(" + "|".join(re.escape(w) for w in sorted(WORDS, key=len, reverse=True)) + r")'")
    # A package's `__all__` lists the names it exports (a verb `resume` is not the event kind "resume").
    exports = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    }
    for node in ast.walk(tree):
        if id(node) in exports:
            continue
        where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                if isinstance(operand, ast.Constant) and operand.value in WORDS:
                    found.append(f"{where}: compares with {operand.value!r}")
                if isinstance(operand, ast.Tuple | ast.List | ast.Set):
                    words = [e.value for e in operand.elts if isinstance(e, ast.Constant) and e.value in WORDS]
                    if words:
                        found.append(f"{where}: tests membership in {words}")
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            # Two words of one group side by side restate part of it (table names that happen to be
            # words of different groups do not).
            values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            for group, words in GROUPS.items():
                if len(values & words) >= 2:
                    found.append(f"{where}: restates {group} {sorted(values & words)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for match in quoted.finditer(node.value):
                found.append(f"{where}: SQL literal {match.group(0)}")
    return found


def test_no_module_restates_a_domain_word():
    offenders = [
        line
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in DEFINING
        for line in _restatements(path)
    ]
    assert not offenders, "import these from hierconsole.vocabulary instead:\n" + "\n".join(offenders)


def test_the_check_sees_a_restated_word(tmp_path):
    # The scan must be able to fail: a module written the old way is caught three times.
    module = PACKAGE / "_restated_for_test.py"
    try:
        module.write_text(
            "ACTIVE = ('queued', 'running')\n"
            "def busy(state):\n    return state == 'running'\n"
            "SQL = \"SELECT count(*) FROM jobs WHERE state = 'queued'\"\n"
        )
        assert len(_restatements(module)) == 3
    finally:
        module.unlink()
