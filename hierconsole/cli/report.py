"""`hierconsole plot` and `hierconsole report`: a study's or a family's figures, and its whole report.

Both read the store only; matplotlib (the `plot` extra) is imported when a figure is drawn, never when
the parser is built.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hierconsole.cli.reading import open_for_reading
from hierconsole.errors import HierconsoleError
from hierconsole.present.export import check_output, write_output
from hierconsole.present.report.figures import (
    FIGURE_FORMATS,
    KINDS,
    check_figure_path,
    check_kind,
    require_matplotlib,
)
from hierconsole.present.report.output import (
    DEFAULT_REPORT,
    check_report_target,
    figures_folder,
    report_format,
    write_report_of,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    kinds = "\n".join(f"  {k.name:<15}{'/'.join(k.targets()):<13}{k.description}" for k in KINDS.values())
    p = subparsers.add_parser(
        "plot",
        help="draw a figure of a study or a family (effects, redistribution, contrasts, training, ...)",
        description=f"Figures as PNG, PDF or SVG (from the suffix of -o); needs the plot extra "
        f"(pip install 'hierconsole[plot]').\n\nkinds (for):\n{kinds}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kind", metavar="KIND", help=f"one of: {', '.join(KINDS)}")
    p.add_argument("ref", metavar="STUDY|FAMILY", help="a study id or name, or a family name or id")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help=f"figure file: .{', .'.join(FIGURE_FORMATS)}")
    p.add_argument("--metric", metavar="NAME", help="the metric of an effects forest (default hier_mAP)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.set_defaults(func=cmd_plot)

    r = subparsers.add_parser(
        "report",
        help="write a study's or a family's report: one self-contained HTML file, or Markdown with its figures",
        description="Protocol, provenance, arm tables with baselines, effects with intervals, redistribution, "
        "contrasts, audits with evidence, post-hoc analyses marked as such, and the commands that regenerate "
        "it. HTML holds its figures inline (readable offline, printable); Markdown writes them into a folder "
        "beside it (NAME_figures/).",
    )
    r.add_argument("ref", nargs="?", metavar="STUDY|FAMILY", help="a study or a family (default: the newest study)")
    r.add_argument("-o", "--output", metavar="FILE", default=DEFAULT_REPORT, help=f"report.html or report.md (default {DEFAULT_REPORT})")
    r.add_argument("--force", action="store_true", help="overwrite the report (and its figures folder) if they exist")
    r.set_defaults(func=cmd_report)


def cmd_plot(args: argparse.Namespace) -> int:
    # Everything the command can refuse is refused before the store is read or a file is made.
    check_kind(args.kind)
    fmt = check_figure_path(args.output)
    check_output(args.output, args.force)
    require_matplotlib()
    from hierconsole.present.report.figures import draw
    from hierconsole.present.report.figures.style import figure_bytes
    from hierconsole.study.read.report_inputs import FamilyInputs, inputs_for

    with open_for_reading(args.home) as store:
        inputs = inputs_for(store, args.ref)
    options = {}
    if args.metric:
        if args.kind != "effects" or isinstance(inputs, FamilyInputs):
            raise HierconsoleError("--metric applies to the effects figure of a study")
        options["metric"] = args.metric
    data = figure_bytes(draw(args.kind, inputs, **options), fmt)
    path = write_output(args.output, lambda tmp: tmp.write_bytes(data), force=args.force)
    print(f"wrote figure {args.kind} of {_label(inputs)} to {path}")
    return 0


def write_report(ref: str | None, output: str | Path, *, home: str | None, force: bool = False) -> Path:
    """Gather, lay out and write the report of `ref` (a study, a family, None for the newest study)."""
    check_report_target(output, force)  # before the store is read: a refused target costs nothing
    require_matplotlib()
    from hierconsole.study.read.report_inputs import inputs_for

    with open_for_reading(home) as store:
        inputs = inputs_for(store, ref)
    return write_report_of(inputs, output, force=force)


def cmd_report(args: argparse.Namespace) -> int:
    path = write_report(args.ref, args.output, home=args.home, force=args.force)
    extra = f" (figures in {figures_folder(path)})" if report_format(path) == "md" else ""
    print(f"wrote report to {path}{extra}")
    return 0


def _label(inputs: object) -> str:
    from hierconsole.study.read.report_inputs import FamilyInputs

    if isinstance(inputs, FamilyInputs):
        return f"family {inputs.name}"
    return f"study {inputs.study_id}"  # type: ignore[attr-defined]
