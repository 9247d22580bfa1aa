"""Studies as the front ends show them: the list with job counts, one study's progress."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hierconsole.errors import NotFoundError
from hierconsole.study.db.catalog import study_levels as study_levels
from hierconsole.study.db.records import StudyInfo, get_study, resolve_study
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import sql_list
from hierconsole.vocabulary import ACTIVE_STATES, JobKind, JobState, Phase

__all__ = ["StudyInfo", "StudyProgress", "StudyRow", "get_study", "list_studies", "resolve_study", "study_progress"]


@dataclass(frozen=True)
class StudyRow:
    """One study in a list of studies."""

    study_id: str
    name: str
    dataset_id: str
    phase: Phase
    created_at: datetime
    jobs: int
    jobs_finished: int


def list_studies(store: Store) -> list[StudyRow]:
    """Every study, oldest first."""
    return [
        StudyRow(r[0], r[1], r[2], Phase(r[3]), r[4], r[5], r[6])
        for r in store.rows(
            "SELECT s.study_id, s.name, s.dataset_id, s.phase, s.created_at, count(j.job_id) AS jobs, "
            "count(j.job_id) FILTER (WHERE j.state = ?) AS jobs_finished "
            "FROM studies s LEFT JOIN jobs j USING (study_id) GROUP BY ALL ORDER BY s.created_at, s.study_id",
            [JobState.FINISHED],
        )
    ]


def has_data(store: Store) -> bool:
    """Whether the store holds any dataset or study (a first launch has neither)."""
    return bool(store.value("SELECT (SELECT count(*) FROM datasets) + (SELECT count(*) FROM studies)"))


@dataclass(frozen=True)
class StudyProgress:
    study_id: str
    name: str
    dataset_id: str
    phase: Phase
    seeds: int
    seeds_trained: int
    active_jobs: int
    posthoc: dict[str, bool]
    """aggregation -> whether its metrics are a post-hoc re-score (the registered one is not)."""


def study_progress(store: Store, study_id: str) -> StudyProgress:
    row = store.dicts(
        "SELECT s.study_id, s.name, s.dataset_id, s.phase, "
        "count(j.job_id) FILTER (WHERE j.kind = ?) AS seeds, "
        "count(j.job_id) FILTER (WHERE j.kind = ? AND j.state = ?) AS seeds_trained, "
        f"count(j.job_id) FILTER (WHERE j.state IN ({sql_list(ACTIVE_STATES)})) AS active_jobs "
        "FROM studies s LEFT JOIN jobs j USING (study_id) WHERE s.study_id = ? GROUP BY ALL",
        [JobKind.FINAL, JobKind.FINAL, JobState.FINISHED, study_id],
    )
    if not row:
        raise NotFoundError(f"no study {study_id!r} in the store")
    r = row[0]
    posthoc = dict(
        store.rows(
            "SELECT aggregation, bool_or(posthoc) FROM metrics WHERE study_id = ? GROUP BY aggregation",
            [study_id],
        )
    )
    return StudyProgress(
        study_id=r["study_id"],
        name=r["name"],
        dataset_id=r["dataset_id"],
        phase=Phase(r["phase"]),
        seeds=r["seeds"],
        seeds_trained=r["seeds_trained"],
        active_jobs=r["active_jobs"],
        posthoc=posthoc,
    )
