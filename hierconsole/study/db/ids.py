"""The stored ids of a study's jobs and runs: one definition, read by planning, ingestion and the audits."""

from __future__ import annotations


def final_job_id(study_id: str, seed: int) -> str:
    return f"{study_id}/final-s{seed}"


def evaluate_job_id(study_id: str) -> str:
    return f"{study_id}/evaluate"


def baseline_run_id(study_id: str, arm: str) -> str:
    """A baseline's run: it belongs to the study's evaluation, which fits and scores it once."""
    return f"{evaluate_job_id(study_id)}/{arm}"


def rescore_job_id(study_id: str, aggregation: str) -> str:
    return f"{study_id}/rescore-{aggregation}"
