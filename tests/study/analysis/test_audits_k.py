"""The protocol audits of a seven-level study (issue 41): the group counts of every level against the
preset's `[expected]`, and the development-only taxonomy shuffle checked edge by edge."""

from __future__ import annotations

import numpy as np
import pytest

from hierconsole.levels import Levels
from hierconsole.study.analysis.audits import protocol
from hierconsole.study.analysis.audits.result import Study
from hierconsole.taxonomy import Taxonomy, development_shuffle
from tests.tiny import tiny_preset

SEVEN = Levels.of(("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom"))


def study(**values) -> Study:
    preset = tiny_preset(**values)
    return Study("st", preset, preset.to_dict())


def seven_level_tree() -> Taxonomy:
    """Each level halves the one below: 64 species, 32 genera, ..., 1 kingdom."""
    counts = [64, 32, 16, 8, 4, 2, 1]
    nodes = tuple(tuple(f"{code}{i}" for i in range(n)) for code, n in zip(SEVEN.codes, counts, strict=True))
    parents = tuple(np.arange(counts[k]) // 2 for k in range(6))
    return Taxonomy(nodes, parents, SEVEN.names)


def counts(s: Study, groups: dict[str, int], params: dict | None = None) -> protocol.SplitCounts:
    return protocol.SplitCounts(
        preset=s.preset,
        protocol={"sizes": {"train": 64, "test": 30}, "params": params or {}},
        tuning_sizes={"fit": 40, "query": 10, "gallery": 10},
        qg_sizes=[{"query": 10, "gallery": 20}],
        development_fit=64,
        final_fit=64,
        groups=groups,
    )


def test_seven_levels_have_their_group_counts_by_level():
    tree = seven_level_tree()
    groups = dict(zip(SEVEN.codes, tree.counts, strict=True))
    params = {f"{code}_groups": {"train": n, "val": 1, "test": 1} for code, n in groups.items()}
    realised = protocol.realised_counts(counts(study(), groups, params))
    assert realised["leaves"] == 64
    assert [realised[f"{code}_groups"] for code in SEVEN.codes[1:]] == [32, 16, 8, 4, 2, 1]
    assert realised["part_leaves"] == [64, 1, 1]
    # Per part: the leaves and every level between them and the top (three levels: the middle only).
    assert [k for k in realised if k.startswith("part_")] == ["part_leaves", *(f"part_{c}_groups" for c in SEVEN.codes[1:-1])]
    assert realised["part_order_groups"] == [8, 1, 1]

    # The declared counts a three-level preset may name pass or fail as before...
    check = protocol.expected_counts(counts(study(**{"expected.leaves": 64}), groups))
    assert check.ok is True and check.evidence == "1 of 1 declared counts match"
    # ... and one that is not a level of this tree is named, not a KeyError.
    check = protocol.expected_counts(counts(study(**{"expected.middle_groups": 32}), groups))
    assert check.ok is False
    assert check.evidence == "0 of 1 declared counts match; middle_groups is not a count of this dataset's levels"


def test_three_level_group_counts_keep_their_names_and_order():
    realised = protocol.realised_counts(counts(study(), {"leaf": 12, "middle": 3, "high": 2}))
    assert list(realised)[-5:] == ["leaves", "middle_groups", "high_groups", "part_leaves", "part_middle_groups"]
    assert protocol.realised_counts(counts(study(), (12, 3, 2))) == realised  # type: ignore[arg-type]


def shuffle_control(tree: Taxonomy, dev_leaves: np.ndarray, parents=None) -> protocol.ShuffleControl:
    shuffle = development_shuffle(tree, dev_leaves, seed=3)
    record = {"seed": 3, "sha256": shuffle.sha256, "path": "shuffle.npz"}
    return protocol.ShuffleControl(
        asked=True,
        record=record,
        true=tree,
        development_leaves=np.repeat(dev_leaves, 2),  # two development rows per leaf
        parents=tuple(shuffle.taxonomy.parents) if parents is None else parents,
        fixed_min=shuffle.fixed_min,
        jobs=(),
    )


def test_the_shuffle_audit_of_seven_levels_passes_edge_by_edge():
    tree = seven_level_tree()
    dev_leaves = np.arange(48)  # the last 16 species (and the genera, families above them) are test-only
    check = protocol.taxonomy_shuffle_development_only(shuffle_control(tree, dev_leaves))
    assert check.ok is True, check.evidence
    shuffle = development_shuffle(tree, dev_leaves, seed=3)
    dev = [np.unique(dev_leaves)]
    for k in range(5):
        dev.append(np.unique(tree.parents[k][dev[-1]]))
    assert [len(d) for d in dev] == [48, 24, 12, 6, 3, 2]
    assert "48 development leaves, 24 genus nodes, 12 family nodes, 6 order nodes, 3 class nodes and 2 phylum nodes shuffled" in check.evidence
    expected_points = ", ".join(
        f"{SEVEN.codes[k]}->{SEVEN.codes[k + 1]} {f} (min {m})"
        for k, (f, m) in enumerate(zip(shuffle.fixed, shuffle.fixed_min, strict=True))
    )
    assert f"fixed points {expected_points};" in check.evidence


@pytest.mark.parametrize("edge", [0, 3])
def test_a_moved_test_only_node_fails_the_shuffle_audit_at_any_edge(edge):
    tree = seven_level_tree()
    dev_leaves = np.arange(48)
    parents = [p.copy() for p in development_shuffle(tree, dev_leaves, seed=3).taxonomy.parents]
    # Swap the parents of the two last (test-only) nodes of this edge's child level.
    last = len(parents[edge]) - 1
    a, b = parents[edge][last - 2], parents[edge][last]
    parents[edge][last - 2], parents[edge][last] = b, a
    check = protocol.taxonomy_shuffle_development_only(shuffle_control(tree, dev_leaves, tuple(parents)))
    assert check.ok is False
    assert "test-only leaves or genus nodes or family nodes" in check.evidence
    assert "were moved" in check.evidence
