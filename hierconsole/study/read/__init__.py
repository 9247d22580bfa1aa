"""The one read layer: every number the CLI prints and the console shows comes from these functions, so
the two front ends can never disagree. Each takes an open `Store` and returns plain dataclasses or polars
frames; none writes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hierconsole.study.read.audits import (
        Check,
        current_audits,
        expected_counts,
        failed_audit_counts,
        run_audits,
        stored_audits,
    )
    from hierconsole.study.read.backups import backup_skipped
    from hierconsole.study.read.datasets import (
        DatasetInfo,
        dataset_taxonomy,
        get_dataset,
        list_datasets,
        taxonomy_lines,
    )
    from hierconsole.study.read.effects import study_effects
    from hierconsole.study.read.jobs import (
        EventRow,
        JobRow,
        active_jobs,
        job_events,
        job_rows,
        job_threads,
        loss_curves,
        resumable_jobs,
        unfinished_studies,
    )
    from hierconsole.study.read.results import (
        RAW_TABLES,
        ReportedAggregation,
        aggregations,
        baselines,
        empty_levels,
        evaluated_per_seed,
        metrics_long,
        per_seed,
        registered_aggregation,
        reported_aggregation,
        selected_epochs,
        table_frame,
        tuning_frame,
        variance,
    )
    from hierconsole.study.read.studies import (
        StudyInfo,
        StudyProgress,
        StudyRow,
        get_study,
        has_data,
        list_studies,
        resolve_study,
        study_levels,
        study_progress,
    )

_MODULES = {
    "audits": ("Check", "current_audits", "expected_counts", "failed_audit_counts", "run_audits", "stored_audits"),
    "backups": ("backup_skipped",),
    "datasets": ("DatasetInfo", "dataset_taxonomy", "get_dataset", "list_datasets", "taxonomy_lines"),
    "effects": ("study_effects",),
    "jobs": (
        "EventRow",
        "JobRow",
        "active_jobs",
        "job_events",
        "job_rows",
        "job_threads",
        "loss_curves",
        "resumable_jobs",
        "unfinished_studies",
    ),
    "results": (
        "RAW_TABLES",
        "ReportedAggregation",
        "aggregations",
        "baselines",
        "empty_levels",
        "evaluated_per_seed",
        "metrics_long",
        "per_seed",
        "registered_aggregation",
        "reported_aggregation",
        "selected_epochs",
        "table_frame",
        "tuning_frame",
        "variance",
    ),
    "studies": (
        "StudyInfo",
        "StudyProgress",
        "StudyRow",
        "get_study",
        "has_data",
        "list_studies",
        "resolve_study",
        "study_levels",
        "study_progress",
    ),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """Each name from its module on first use: a front end pays at start only for what it reads then
    (the console's first frame needs studies and jobs, not audits, effects or export)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Check",
    "DatasetInfo",
    "EventRow",
    "JobRow",
    "RAW_TABLES",
    "ReportedAggregation",
    "StudyInfo",
    "StudyProgress",
    "StudyRow",
    "active_jobs",
    "aggregations",
    "backup_skipped",
    "baselines",
    "current_audits",
    "dataset_taxonomy",
    "empty_levels",
    "evaluated_per_seed",
    "expected_counts",
    "failed_audit_counts",
    "get_dataset",
    "get_study",
    "has_data",
    "job_events",
    "job_rows",
    "job_threads",
    "list_datasets",
    "list_studies",
    "loss_curves",
    "metrics_long",
    "per_seed",
    "registered_aggregation",
    "reported_aggregation",
    "resolve_study",
    "resumable_jobs",
    "run_audits",
    "selected_epochs",
    "stored_audits",
    "study_effects",
    "study_levels",
    "study_progress",
    "table_frame",
    "taxonomy_lines",
    "tuning_frame",
    "unfinished_studies",
    "variance",
]
