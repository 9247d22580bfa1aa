"""An outer-split family with named arms (paper Sec. 5.5): each outer split is the unit, each arm one
trained cell or baseline of one configuration, and the paired gains between arms are taken per split.

In a family file:

    [splits.split-1]                      # one table per outer split: what makes the split
    "split.seed" = 1

    [configurations.matched]              # optional: studies trained on every split (else one per split)
    "training.cells" = ["E_R", "H_R"]

    [[arms]]                              # an arm: a cell (E_R...) or baseline (frozen...) of a configuration
    name = "matched-hyperbolic"
    label = "matched Hyperbolic"          # optional: how tables show it (default: name)
    configuration = "matched"             # required when [configurations] is given
    arm = "H_R"

    [[gains]]                             # A - B on every split, then mean ± SD over splits
    a = "taxonomy-supcon"
    b = "matched-hyperbolic"

The members are every split crossed with every configuration, named `SPLIT.CONFIGURATION` (or `SPLIT`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hierconsole.factorial import arm_codes
from hierconsole.vocabulary import ARMS, BASELINES

OUTER_TABLES: tuple[str, ...] = ("splits", "configurations", "arms", "gains")
"""The tables of a family file that declare an outer-split family with arms."""
RESERVED_SPLIT_NAMES: frozenset[str] = frozenset(
    ("name", "label", "arm", "configuration", "metric", "mean", "sd", "n_splits", "gain", "a", "b")
    + ("positive_splits", "ci95_t_lo", "ci95_t_hi", "ci95_boot_lo", "ci95_boot_hi", "ci95_boot_seed")
    + ("p_signflip", "seeds_to_resolve")
)
"""Split names head a column of the exported arms and gains tables, so they may not be one of theirs."""


@dataclass(frozen=True)
class OuterArm:
    name: str
    label: str
    configuration: str | None
    arm: str
    """A cell (an arm of the factorial) or a baseline (BASELINES) of the configuration's studies."""


@dataclass(frozen=True)
class OuterGain:
    name: str
    a: str
    b: str


@dataclass(frozen=True)
class OuterArms:
    splits: tuple[str, ...]
    configurations: tuple[str, ...]
    """Empty when every split is one study."""
    arms: tuple[OuterArm, ...]
    gains: tuple[OuterGain, ...]

    def member(self, split: str, configuration: str | None) -> str:
        return outer_member_name(split, configuration)

    def definition(self) -> dict[str, Any]:
        """What the store records in the family's definition, under `outer`."""
        return {
            "splits": list(self.splits),
            "configurations": list(self.configurations),
            "members": {
                self.member(s, c): [s, c] for s in self.splits for c in (self.configurations or (None,))
            },
            "arms": [
                {"name": a.name, "label": a.label, "configuration": a.configuration, "arm": a.arm} for a in self.arms
            ],
            "gains": [{"name": g.name, "a": g.a, "b": g.b} for g in self.gains],
        }


def outer_member_name(split: str, configuration: str | None) -> str:
    return split if configuration is None else f"{split}.{configuration}"


def outer_members(
    splits: Sequence[tuple[str, Mapping[str, Any]]],
    configurations: Sequence[tuple[str, Mapping[str, Any]]],
    problems: list[str],
) -> list[tuple[str, dict[str, Any]]]:
    """Every split crossed with every configuration as (member, overrides); a key set by both a split
    and a configuration is a problem (neither may silently win)."""
    if not splits:
        problems.append("[splits] is empty: an outer-split family needs at least one [splits.NAME] table")
    members = []
    # Without [configurations] every split is one study, named for the split alone.
    crossed: list[tuple[str | None, Mapping[str, Any]]] = [(None, {})]
    if configurations:
        crossed = list(configurations)
    for split, split_values in splits:
        if split in RESERVED_SPLIT_NAMES:
            problems.append(f"splits.{split}: {split!r} names a column of the arms and gains tables; rename the split")
        for configuration, config_values in crossed:
            both = sorted(set(split_values) & set(config_values))
            for key in both:
                problems.append(
                    f"splits.{split}.{key} and configurations.{configuration}.{key}: set it in one of them only"
                )
            members.append((outer_member_name(split, configuration), {**config_values, **split_values}))
    return members


def build_outer(
    splits: Sequence[str],
    configurations: Sequence[str],
    arms: object,
    gains: object,
    member_cells: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]],
    problems: list[str],
) -> OuterArms | None:
    """Validate the [[arms]] and [[gains]] of an outer-split family against its members' presets
    (`member_cells`: member -> (cells, baselines)); problems are appended, None when there were any."""
    before = len(problems)
    built: list[OuterArm] = []
    if not isinstance(arms, list) or not arms:
        problems.append("[[arms]]: an outer-split family needs at least one arm (name, arm, configuration)")
        arms = []
    names: set[str] = set()
    for i, entry in enumerate(arms):
        where = f"arms[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: expected a table with name, arm (and configuration, label)")
            continue
        unknown = sorted(set(entry) - {"name", "label", "configuration", "arm"})
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: name, label, configuration, arm")
        name, arm, configuration = entry.get("name"), entry.get("arm"), entry.get("configuration")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name: give the arm a name (a string), e.g. \"matched-hyperbolic\"")
            continue
        if name in names:
            problems.append(f"{where}.name = {name!r}: listed twice")
            continue
        names.add(name)
        if not isinstance(arm, str) or (arm not in BASELINES and arm_codes(arm) is None):
            problems.append(
                f"{where}.arm = {arm!r}: expected an arm of the members' factorial ({', '.join(ARMS)}, ...) or "
                f"a baseline ({', '.join(BASELINES)})"
            )
            continue
        if configurations:
            if configuration not in configurations:
                problems.append(
                    f"{where}.configuration = {configuration!r}: expected one of {', '.join(configurations)}"
                )
                continue
        elif configuration is not None:
            problems.append(f"{where}.configuration: the family has no [configurations]; remove it")
            continue
        for split in splits:
            member = outer_member_name(split, configuration)
            if member not in member_cells:
                continue  # that member's own problems are already listed
            cells, baselines = member_cells[member]
            if arm not in (*cells, *baselines):
                what = "score" if arm in BASELINES else "train"
                problems.append(
                    f"{where}: member {member} does not {what} {arm} (cells {', '.join(cells) or 'none'}; "
                    f"baselines {', '.join(baselines) or 'none'})"
                )
                break
        built.append(OuterArm(name, str(entry.get("label") or name), configuration, str(arm)))
    specs: list[OuterGain] = []
    if not isinstance(gains, list):
        problems.append("gains must be an array of tables [[gains]]")
        gains = []
    for i, entry in enumerate(gains):
        where = f"gains[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: expected a table with a, b (and optional name)")
            continue
        unknown = sorted(set(entry) - {"name", "a", "b"})
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: name, a, b")
        a, b = entry.get("a"), entry.get("b")
        ok = True
        for side, ref in (("a", a), ("b", b)):
            if ref not in names:
                problems.append(f"{where}.{side} = {ref!r}: not an arm; arms: {', '.join(sorted(names)) or 'none'}")
                ok = False
        if ok and a == b:
            problems.append(f"{where}: a and b are both {a!r}; a gain compares two arms")
        specs.append(OuterGain(str(entry.get("name") or f"{a} - {b}"), str(a), str(b)))
    if len(problems) > before:
        return None
    return OuterArms(tuple(splits), tuple(configurations), tuple(built), tuple(specs))
