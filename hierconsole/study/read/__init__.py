"""The one read layer: every number the CLI prints and the console shows comes from these functions, so
the two front ends can never disagree. Each takes an open `Store` and returns plain dataclasses or polars
frames; none writes.
"""

from hierconsole.study.read.audits import Check, current_audits, failed_audit_counts, stored_audits
from hierconsole.study.read.datasets import DatasetInfo, get_dataset, list_datasets, taxonomy_lines
from hierconsole.study.read.jobs import EventRow, JobRow, job_events, job_rows, loss_curves
from hierconsole.study.read.results import (
    RAW_TABLES,
    aggregations,
    evaluated_per_seed,
    metrics_long,
    per_seed,
    registered_aggregation,
    selected_epochs,
    table_frame,
)
from hierconsole.study.read.studies import (
    StudyInfo,
    StudyProgress,
    StudyRow,
    get_study,
    has_data,
    list_studies,
    resolve_study,
    study_progress,
)

__all__ = [
    "RAW_TABLES",
    "Check",
    "DatasetInfo",
    "EventRow",
    "JobRow",
    "StudyInfo",
    "StudyProgress",
    "StudyRow",
    "aggregations",
    "current_audits",
    "evaluated_per_seed",
    "failed_audit_counts",
    "get_dataset",
    "get_study",
    "has_data",
    "job_events",
    "job_rows",
    "list_datasets",
    "list_studies",
    "loss_curves",
    "metrics_long",
    "per_seed",
    "registered_aggregation",
    "resolve_study",
    "selected_epochs",
    "stored_audits",
    "study_progress",
    "table_frame",
    "taxonomy_lines",
]
