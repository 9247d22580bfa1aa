"""`hierconsole export mlflow STUDY --tracking-uri URI`: a study's final runs logged to an experiment tracker.

`export` itself is `cli/analysis.py`'s (tables to files); this adds the tracker targets to its parser and
takes over when TABLE names one. The tracker's package is an optional extra, imported when it runs.
"""

from __future__ import annotations

import argparse
import os

from hierconsole.cli.reading import open_for_reading
from hierconsole.errors import HierconsoleError
from hierconsole.plurals import counted

TRACKERS: tuple[str, ...] = ("mlflow",)
URI_ENV = "MLFLOW_TRACKING_URI"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`export`'s arguments for a tracker target (unused by the table targets)."""
    parser.add_argument(
        "tracked_study", nargs="?", metavar="STUDY", help="with `export mlflow`: the study whose runs to log"
    )
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help=f"with `export mlflow`: the tracking store, e.g. sqlite:///mlflow.db or http://HOST:PORT "
        f"(default ${URI_ENV})",
    )


def is_tracker_export(args: argparse.Namespace) -> bool:
    """Whether `export` was asked for a tracker (or given a tracker's argument, which a table refuses)."""
    if args.table in TRACKERS:
        return True
    if args.tracked_study or args.tracking_uri:
        raise HierconsoleError(
            f"STUDY and --tracking-uri belong to `export {'|'.join(TRACKERS)}`; table {args.table!r} takes "
            "--study ID\n  fix: hierconsole export TABLE --study ID -o PATH"
        )
    return False


def cmd_export_tracker(args: argparse.Namespace) -> int:
    if args.tracked_study and args.study and args.tracked_study != args.study:
        raise HierconsoleError("give the study once: `export mlflow STUDY` or `export mlflow --study STUDY`")
    study = args.tracked_study or args.study
    if not study:
        raise HierconsoleError(
            f"export {args.table} needs a STUDY\n  fix: hierconsole export {args.table} STUDY --tracking-uri URI"
        )
    uri = args.tracking_uri or os.environ.get(URI_ENV)
    if not uri:
        raise HierconsoleError(
            f"export {args.table} needs --tracking-uri URI (or ${URI_ENV})\n"
            "  fix: e.g. --tracking-uri sqlite:///mlflow.db, or http://HOST:PORT for a tracking server"
        )
    # Everything is read (and the study checked) before the tracker is opened, which may create its store.
    from hierconsole.study.read.tracking import tracked_study

    with open_for_reading(args.home) as store:
        tracked = tracked_study(store, study)
    from hierconsole.trackers.mlflow import export_study

    summary = export_study(tracked, uri)
    print(
        f"exported {counted(len(tracked.runs), 'run')} of study {tracked.study_id} to MLflow experiment "
        f"{summary.experiment_name!r} (id {summary.experiment_id}) at {uri}: {summary.created} created, "
        f"{summary.updated} updated, {counted(summary.metrics_logged, 'metric value')} logged"
    )
    return 0
