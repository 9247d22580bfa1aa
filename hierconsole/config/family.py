"""Family presets: one base preset, named members that each override some of its options, and the
contrasts between members that the family exists to measure (paper S9, S10, the outer splits).

A family file is TOML:

    [family]
    name = "nabirds-curvature-control"
    description = "..."
    base = "nabirds-parent-disjoint"      # a shipped preset name, or a path relative to this file

    [overrides]                           # applied to every member
    "training.epochs" = 84

    [members.near-flat]                   # one table per member, in order; dotted keys as in --set
    "geometry.poincare.c" = 1e-6

    [[contrasts]]                         # A - B, paired by training seed
    name = "base - near-flat"
    a = "base"
    b = "near-flat"
    arms = "H_R:H_R"                      # optional; default: every arm both train, with itself

An outer-split family with arms (paper Sec. 5.5) gives [splits.NAME], optional [configurations.NAME],
[[arms]] and [[gains]] instead of [members.NAME] (see `hierconsole.config.outer_arms`).

Every member's preset is validated when the family is loaded, so a bad member fails before any study
is created. Members share the training seeds: a member may not override them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hierconsole.config.files import presets_dir, read_toml, resolve_preset, resolve_toml
from hierconsole.config.options import show
from hierconsole.config.outer_arms import OUTER_TABLES, OuterArms, build_outer, outer_members
from hierconsole.config.preset import Preset
from hierconsole.errors import ConfigError, HierconsoleError, NotFoundError
from hierconsole.factorial import arm_codes
from hierconsole.names import name_problem
from hierconsole.vocabulary import ARMS

FAMILY_TABLE = "family"
SHARED_KEYS: tuple[str, ...] = ("training.seeds",)
"""Options every member must share: contrasts pair members by training seed."""


@dataclass(frozen=True)
class Member:
    name: str
    overrides: dict[str, Any]
    """Dotted key -> value on top of the base preset and the family's common overrides."""
    preset: Preset


@dataclass(frozen=True)
class ContrastSpec:
    name: str
    a: str
    b: str
    arms: tuple[str, str] | None = None


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    base: str
    """The base preset as given in the file (a shipped name or a path)."""
    overrides: dict[str, Any]
    members: tuple[Member, ...]
    contrasts: tuple[ContrastSpec, ...]
    source: str = "<dict>"
    outer: OuterArms | None = None
    """The outer splits and their arms, for an outer-split family with arms (else None)."""
    command_line: dict[str, Any] = field(default_factory=dict)
    """The command line's overrides (--set, --epochs, --seeds, --device) on every member, also in
    `overrides`: recorded apart, so a report can print the command that runs the family again."""

    def run_argument(self) -> str | None:
        """What `hierconsole run` takes to load this family again: a shipped family's name, else its file;
        None for a family built in memory (a sweep)."""
        path = Path(self.source)
        if not path.is_file():
            return None
        return path.stem if path.resolve() == (families_dir() / f"{path.stem}.toml").resolve() else str(path.resolve())

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise NotFoundError(
            f"family {self.name!r} has no member {name!r}; members: {', '.join(m.name for m in self.members)}"
        )

    def definition(self) -> dict[str, Any]:
        """What the store records: the base, every member's overrides and full preset, the contrasts
        (and, for an outer-split family with arms, its splits, arms and gains under `outer`)."""
        doc: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "base": self.base,
            "overrides": self.overrides,
            "members": [
                {"name": m.name, "overrides": m.overrides, "preset_sha256": m.preset.sha256()} for m in self.members
            ],
            "contrasts": [
                {"name": c.name, "a": c.a, "b": c.b, "arms": None if c.arms is None else ":".join(c.arms)}
                for c in self.contrasts
            ],
        }
        if self.outer is not None:
            doc["outer"] = self.outer.definition()
        # How to run it again (a report's Regenerate): the file, and the command line's overrides if any.
        if self.run_argument() is not None:
            doc["file"] = self.run_argument()
        if self.command_line:
            doc["command_line"] = dict(self.command_line)
        return doc

    def sha256(self) -> str:
        text = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def with_overrides(self, values: Mapping[str, Any]) -> Family:
        """The same family with command-line overrides (epochs, seeds, device, --set) on every member."""
        if not values:
            return self
        members = tuple(
            Member(m.name, m.overrides, m.preset.with_overrides(values=dict(values))) for m in self.members
        )
        return Family(
            name=self.name,
            description=self.description,
            base=self.base,
            overrides={**self.overrides, **values},
            members=members,
            contrasts=self.contrasts,
            source=self.source,
            outer=self.outer,
            command_line={**self.command_line, **values},
        )


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"geometry": {"poincare": {"c": 1}}}` and `{"geometry.poincare.c": 1}` both -> the dotted form."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten(value, path))
        else:
            out[path] = value
    return out


def _member_preset(base: Preset, common: Mapping[str, Any], overrides: Mapping[str, Any], study_name: str) -> Preset:
    return base.with_overrides(values={**common, **overrides, "study.name": study_name})


def member_study_name(family: str, member: str) -> str:
    return f"{family}.{member}"


def build_family(
    *,
    name: str,
    description: str,
    base_ref: str,
    base: Preset,
    overrides: Mapping[str, Any],
    members: Sequence[tuple[str, Mapping[str, Any]]],
    contrasts: Sequence[Mapping[str, Any]],
    source: str,
    outer: Mapping[str, Any] | None = None,
) -> Family:
    """Validate a family (every member preset, every contrast) and build it; ConfigError lists all problems.

    `outer` (an outer-split family with arms) holds `splits` and `configurations` as (name, overrides)
    pairs and the raw `arms` and `gains`; the members are then every split crossed with every configuration.
    """
    problems: list[str] = []
    if outer is not None:
        if members:
            problems.append("give either [members.NAME] or [splits.NAME] (an outer-split family), not both")
        members = outer_members(outer["splits"], outer["configurations"], problems)
    # Member names become part of study names (so of ids and folder names) and of `FAMILY:member` references.
    if (problem := name_problem(name)) is not None:
        problems.append(f"family.name = {show(name)}: {problem}")
    if not members and outer is None:
        problems.append("no [members.NAME] table: a family needs at least one member")
    for key in SHARED_KEYS:
        for member, values in members:
            if key in values:
                problems.append(f"members.{member}.{key}: members share the training seeds; set it in [overrides]")
    built: list[Member] = []
    seen: set[str] = set()
    for member, values in members:
        if (problem := name_problem(member)) is not None:
            problems.append(f"members.{show(member)}: {problem}")
            continue
        if member in seen:
            problems.append(f"members.{member}: listed twice")
            continue
        seen.add(member)
        try:
            preset = _member_preset(base, overrides, values, member_study_name(name, member))
        except ConfigError as exc:
            detail = getattr(exc, "problems", [str(exc)])
            problems += [f"members.{member}: {p}" for p in detail]
            continue
        built.append(Member(member, dict(values), preset))
    by_name = {m.name: m for m in built}
    specs: list[ContrastSpec] = []
    for i, c in enumerate(contrasts):
        where = f"contrasts[{i}]"
        if not isinstance(c, Mapping):
            problems.append(f"{where}: expected a table with a, b (and optional name, arms)")
            continue
        unknown = sorted(set(c) - {"name", "a", "b", "arms"})
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: name, a, b, arms")
        a, b = c.get("a"), c.get("b")
        ok = True
        for side, ref in (("a", a), ("b", b)):
            if ref not in seen:
                problems.append(f"{where}.{side} = {ref!r}: not a member; members: {', '.join(m for m, _ in members)}")
                ok = False
        arms = None
        if "arms" in c:
            text = str(c["arms"])
            left, sep, right = text.partition(":")
            if not sep or arm_codes(left) is None or arm_codes(right) is None:
                problems.append(
                    f"{where}.arms = {text!r}: expected ARM_A:ARM_B, each an arm of the members' factorial "
                    f"(e.g. {ARMS[0]}:{ARMS[-1]})"
                )
                ok = False
            else:
                arms = (left, right)
        if ok and isinstance(a, str) and isinstance(b, str) and a in by_name and b in by_name:
            if arms is not None:
                for ref, arm in ((a, arms[0]), (b, arms[1])):
                    if arm not in by_name[ref].preset.cells:
                        problems.append(
                            f"{where}.arms: member {ref} does not train {arm} (cells {', '.join(by_name[ref].preset.cells)})"
                        )
            elif not set(by_name[a].preset.cells) & set(by_name[b].preset.cells):
                problems.append(f"{where}: members {a} and {b} train no arm in common; give arms = \"ARM_A:ARM_B\"")
        cname = c.get("name", f"{a} - {b}")
        specs.append(ContrastSpec(str(cname), str(a), str(b), arms))
    outer_arms = None
    if outer is not None:
        outer_arms = build_outer(
            [n for n, _ in outer["splits"]],
            [n for n, _ in outer["configurations"]],
            outer.get("arms"),
            outer.get("gains", []),
            {m.name: (m.preset.cells, m.preset.evaluation.baselines) for m in built},
            problems,
        )
    if problems:
        lines = [f"{source}: invalid family ({len(problems)} problem{'s' if len(problems) != 1 else ''})"]
        raise ConfigError("\n".join([*lines, *(f"  - {p}" for p in problems)]))
    return Family(
        name=name,
        description=description,
        base=base_ref,
        overrides=dict(overrides),
        members=tuple(built),
        contrasts=tuple(specs),
        source=source,
        outer=outer_arms,
    )


def families_dir() -> Path:
    return presets_dir() / "families"


def is_family_file(path_or_name: str | Path) -> bool:
    """Whether a `run` argument names a family: a TOML file with a [family] table, or a shipped family."""
    try:
        path = resolve_family(path_or_name)
    except NotFoundError:
        return False
    return read_toml(path, "preset or family").get(FAMILY_TABLE) is not None


def resolve_family(path_or_name: str | Path) -> Path:
    return resolve_toml(path_or_name, families_dir(), "family", lambda: [n for n, _, _ in list_families()])


def load_family(path_or_name: str | Path) -> Family:
    path = resolve_family(path_or_name)
    data = read_toml(path, "family")
    head = data.get(FAMILY_TABLE)
    if not isinstance(head, Mapping):
        raise ConfigError(f"{path}: not a family preset: it has no [family] table (a study preset runs as it is)")
    allowed = (FAMILY_TABLE, "overrides", "members", "contrasts", *OUTER_TABLES)
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"{path}: unknown table(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    missing = [k for k in ("name", "base") if not isinstance(head.get(k), str) or not head.get(k)]
    if missing:
        raise ConfigError(f"{path}: [family] needs {' and '.join(missing)} (strings)")
    base_ref = str(head["base"])
    relative_base = path.parent / base_ref
    try:
        base_path = relative_base if relative_base.is_file() else resolve_preset(base_ref)
    except HierconsoleError as exc:
        raise ConfigError(f"{path}: family.base = {base_ref!r}: {exc}") from None
    from hierconsole.config.files import load_preset

    base = load_preset(base_path)
    members_table = data.get("members", {})
    if not isinstance(members_table, Mapping):
        raise ConfigError(f"{path}: members must be tables [members.NAME]")
    members = []
    for member, values in members_table.items():
        if not isinstance(values, Mapping):
            raise ConfigError(f"{path}: members.{member} must be a table of overrides")
        members.append((str(member), flatten(values)))
    contrasts = data.get("contrasts", [])
    if not isinstance(contrasts, list):
        raise ConfigError(f"{path}: contrasts must be an array of tables [[contrasts]]")
    outer = None
    if any(table in data for table in OUTER_TABLES):
        if "splits" not in data:
            raise ConfigError(f"{path}: [[arms]], [[gains]] and [configurations] need [splits.NAME] tables (the outer splits)")
        outer = {
            "splits": _named_tables(path, data, "splits"),
            "configurations": _named_tables(path, data, "configurations"),
            "arms": data.get("arms"),
            "gains": data.get("gains", []),
        }
    return build_family(
        name=str(head["name"]),
        description=str(head.get("description", "")),
        base_ref=base_ref,
        base=base,
        overrides=flatten(data.get("overrides", {})),
        members=members,
        contrasts=contrasts,
        source=str(path),
        outer=outer,
    )


def _named_tables(path: Path, data: Mapping[str, Any], table: str) -> list[tuple[str, dict[str, Any]]]:
    """`[TABLE.NAME]` tables as (name, dotted overrides), in file order."""
    found = data.get(table, {})
    if not isinstance(found, Mapping):
        raise ConfigError(f"{path}: {table} must be tables [{table}.NAME]")
    out = []
    for name, values in found.items():
        if not isinstance(values, Mapping):
            raise ConfigError(f"{path}: {table}.{name} must be a table of overrides")
        out.append((str(name), flatten(values)))
    return out


def list_families() -> list[tuple[str, Path, str]]:
    """Shipped families as (name, path, description), sorted by name."""
    out = []
    folder = families_dir()
    for path in sorted(folder.glob("*.toml"), key=lambda p: p.stem) if folder.is_dir() else []:
        try:
            head = read_toml(path, "family").get(FAMILY_TABLE, {})
            description = head.get("description", "") if isinstance(head, Mapping) else ""
        except ConfigError as exc:
            description = f"(unreadable: {exc})"
        out.append((path.stem, path, str(description)))
    return out


def sweep_family(base_ref: str, base: Preset, grid: Sequence[tuple[str, Sequence[Any]]], name: str | None) -> Family:
    """A family from a grid of overrides (`sweep --grid key=v1,v2 ...`): one member per combination, in
    grid order; each member after the first is contrasted with the first (the baseline)."""
    import itertools

    keys = [k for k, _ in grid]
    members = []
    for combo in itertools.product(*(values for _, values in grid)):
        label = "_".join(f"{k.rsplit('.', 1)[-1]}={_value_text(v)}" for k, v in zip(keys, combo, strict=True))
        members.append((label, dict(zip(keys, combo, strict=True))))
    first = members[0][0] if members else ""
    contrasts = [{"name": f"{m} - {first}", "a": m, "b": first} for m, _ in members[1:]]
    return build_family(
        name=name or f"{base.name}-sweep",
        description=f"sweep of {base.name} over {', '.join(keys)}",
        base_ref=base_ref,
        base=base,
        overrides={},
        members=members,
        contrasts=contrasts,
        source=f"sweep of {base_ref}",
    )


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return "+".join(_value_text(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)
