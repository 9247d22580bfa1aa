"""`hierconsole contrast|families|sweep` and `run FAMILY.toml`: studies compared with each other."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from hierconsole.cli.analysis import check_precision
from hierconsole.cli.output import output_console, print_grid
from hierconsole.cli.reading import open_for_reading
from hierconsole.cli.running import add_run_options, cmd_run
from hierconsole.config import load_preset
from hierconsole.config.family import sweep_family
from hierconsole.config.overrides import parse_literal
from hierconsole.errors import HierconsoleError
from hierconsole.names import check_name
from hierconsole.present.json_output import json_text
from hierconsole.present.tables.evidence import evidence_legend
from hierconsole.present.tables.families import (
    contrast_grid,
    families_grid,
    outer_arms_grid,
    outer_gains_grid,
)
from hierconsole.study.read.contrasts import (
    DEFAULT_METRIC,
    StudyContrast,
    contrast_family,
    metric_columns,
    parse_arm_pair,
)
from hierconsole.study.read.effects import SESOI_HELP, parse_sesoi
from hierconsole.study.read.families import (
    FamilyRow,
    family_contrasts,
    get_family,
    is_family,
    list_families,
    outer_arms_so_far,
    resolve_reference,
)
from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "contrast",
        help="paired contrasts between two studies (or a family's declared contrasts), by training seed",
        description="metric(A, arm_a, seed) - metric(B, arm_b, seed), Q/G perturbations averaged within "
        "seed, per level and for the hier score; mean, sample SD and positive seeds. STUDY is a study id or "
        "name, or FAMILY:member; with one FAMILY argument, every contrast the family declares.",
    )
    c.add_argument("a", metavar="STUDY_A|FAMILY")
    c.add_argument("b", metavar="STUDY_B", nargs="?")
    c.add_argument("--metric", default=DEFAULT_METRIC, help=f"ranking metric (default {DEFAULT_METRIC}; or R@1, ...)")
    c.add_argument("--arms", metavar="ARM_A:ARM_B", help="compare these arms (default: every arm both train)")
    c.add_argument("--json", action="store_true", help="print JSON only")
    c.add_argument("--sesoi", metavar="DELTA", help=SESOI_HELP)
    c.add_argument("--precision", type=int, default=EFFECT_DIGITS, metavar="N", help="decimals shown")
    c.set_defaults(func=cmd_contrast)

    f = sub.add_parser(
        "families",
        help="families and their members' phases and progress; an outer-split family's arms and gains",
        description="Every family with its members' studies, phases and jobs. With one FAMILY that declares "
        "outer-split arms ([splits] and [[arms]], e.g. nabirds-parent-disjoint-outer-arms), also each arm's "
        "value per outer split (mean over its seeds), mean ± SD over splits, and the paired gains per split.",
    )
    f.add_argument("family", nargs="?", help="one family (id or name)")
    f.add_argument("--json", action="store_true", help="print JSON only")
    f.add_argument(
        "--precision",
        type=int,
        default=None,
        metavar="N",
        help=f"decimals shown (default {ARM_DIGITS} for arms, {EFFECT_DIGITS} for gains)",
    )
    f.set_defaults(func=cmd_families)

    s = sub.add_parser(
        "sweep",
        help="run a preset over a grid of overrides as a family (one member per combination)",
        description="Each --grid KEY=V1,V2,... adds an axis; members are every combination, sharing the "
        "training seeds; every member is contrasted with the first.",
    )
    s.add_argument("preset", help="a shipped preset name or a TOML file")
    s.add_argument(
        "--grid", action="append", type=_grid_axis, required=True, metavar="KEY=V1,V2", help="an axis (repeatable)"
    )
    s.add_argument("--name", help="family name (default: <preset>-sweep)")
    s.add_argument("--dataset", help="dataset id in the store (overrides data.dataset)")
    add_run_options(s)
    s.set_defaults(func=cmd_sweep)


def _split_values(text: str) -> list[str]:
    """Comma-separated values; commas inside [...] belong to a list value."""
    out, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        current += ch
    out.append(current)
    return [v.strip() for v in out]


def _grid_axis(text: str) -> tuple[str, list[Any]]:
    key, sep, raw = text.partition("=")
    values = _split_values(raw) if sep else []
    if not key.strip() or not values or any(not v for v in values):
        raise argparse.ArgumentTypeError(f"expected KEY=V1,V2,... (e.g. geometry.poincare.c=1e-6,0.1), got {text!r}")
    return key.strip(), [parse_literal(v) for v in values]


# ---------------------------------------------------------------------------------------- commands


def cmd_contrast(args: argparse.Namespace) -> int:
    metric_columns(args.metric)
    check_precision(args.precision)
    sesoi = parse_sesoi(args.sesoi)
    arms = [parse_arm_pair(args.arms)] if args.arms else None
    with open_for_reading(args.home) as store:
        if args.b is None:
            if not is_family(store, args.a):
                raise HierconsoleError(
                    f"{args.a!r} is not a family in the store; give two studies (`contrast STUDY_A STUDY_B`) "
                    "or a family name (see `hierconsole families`)"
                )
            if arms is not None:
                raise HierconsoleError("--arms applies to `contrast STUDY_A STUDY_B`; a family declares its arms")
            family, contrasts = family_contrasts(store, args.a, metric=args.metric, sesoi=sesoi)
            if args.json:
                doc = {"family": family.family_id, "contrasts": [{"name": c.name, **c.to_json()} for c in contrasts]}
                sys.stdout.write(json_text(doc))
                _dropped_to_stderr(contrasts)
                return 0
            console = output_console()
            console.print(f"family [bold]{family.name}[/] ({family.family_id})")
            for c in contrasts:
                print_grid(console, contrast_grid(c, args.precision))
            _legend(console, contrasts)
            return 0
        a, b = resolve_reference(store, args.a), resolve_reference(store, args.b)
        result = contrast_family(store, a, b, metric=args.metric, arms=arms, sesoi=sesoi)
    if args.json:
        sys.stdout.write(json_text(result.to_json()))
        _dropped_to_stderr([result])
        return 0
    console = output_console()
    print_grid(console, contrast_grid(result, args.precision))
    _legend(console, [result])
    return 0


def _legend(console: Console, contrasts: Sequence[StudyContrast]) -> None:
    for line in evidence_legend([r for c in contrasts for r in c.rows]):
        console.print(line)


def _dropped_to_stderr(contrasts: Sequence[StudyContrast]) -> None:
    for c in contrasts:
        dropped = c.dropped_text()
        if dropped:
            print(f"note: {c.name or c.a + ' - ' + c.b}: {dropped}", file=sys.stderr)


def cmd_families(args: argparse.Namespace) -> int:
    check_precision(args.precision)
    with open_for_reading(args.home) as store:
        families = [get_family(store, args.family)] if args.family else list_families(store)
        # Only one named family shows its arms: a listing of every family never fails on one of them.
        outer = outer_arms_so_far(store, families[0]) if args.family else None
    if args.json:
        docs = [_family_json(f) for f in families]
        if args.family:
            docs[0]["outer"] = outer if outer is None or isinstance(outer, str) else outer.to_json()
        doc = docs[0] if args.family else {"families": docs}
        sys.stdout.write(json_text(doc, default=str))
        return 0
    console = output_console()
    if not families:
        console.print("no families yet: `hierconsole run FAMILY.toml` or `hierconsole sweep PRESET --grid ...`")
        return 0
    print_grid(console, families_grid(families))
    if isinstance(outer, str):
        console.print(Text(f"arms over outer splits: {outer}", style="yellow"))
    elif outer is not None:
        arm_digits = ARM_DIGITS if args.precision is None else args.precision
        print_grid(console, outer_arms_grid(outer, arm_digits))
        if outer.gains:
            print_grid(console, outer_gains_grid(outer, EFFECT_DIGITS if args.precision is None else args.precision))
    return 0


def _family_json(family: FamilyRow) -> dict[str, Any]:
    return {
        "family_id": family.family_id,
        "name": family.name,
        "created_at": family.created_at.isoformat(),
        "description": family.definition.get("description", ""),
        "members": [
            {
                "member": m.member,
                "study_id": m.study_id,
                "phase": str(m.phase),
                "jobs": m.jobs,
                "jobs_finished": m.jobs_finished,
                "overrides": m.overrides,
            }
            for m in family.members
        ],
    }


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.name is not None:
        check_name(args.name, "--name")
    base = load_preset(args.preset)
    keys = [k for k, _ in args.grid]
    if len(set(keys)) != len(keys):
        raise HierconsoleError(f"--grid names a key twice ({', '.join(keys)}); give each axis once")
    family = sweep_family(args.preset, base, args.grid, args.name)
    return cmd_run(args, family)
