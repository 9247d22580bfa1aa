"""The files of a job's folder: written by the worker, read by the orchestrator (and by the evaluator)."""

from __future__ import annotations

from pathlib import Path

from hierconsole.contract.jobspec import CellSpec

SPEC = "spec.json"
EVENTS = "events.jsonl"
"""The worker's typed events, one JSON line each (`contract.events`); the replay log after a crash."""
HEARTBEAT = "heartbeat"
"""Touched every few seconds by a live worker; a stale one means a frozen process."""
LOCK = "job.lock"
"""flock-ed by the worker for its whole life: one job never runs twice."""
WORKER_LOG = "worker.log"
ERROR = "error.txt"
STOPPED = "stopped.txt"
"""Why an orchestrator stopped the job when it could no longer write the store (e.g. a full disk); the
next orchestrator records it as the job's error."""
EXECUTOR = "executor.json"
"""How a job's current attempt runs where the orchestrator is not the worker's parent (a Ray job): what
the next orchestrator needs to find it again, and how far its events and files were brought home."""
CHECKPOINTS = "checkpoints"
EMBEDDINGS = "embeddings"
"""An evaluation's projected test embeddings, kept for re-scoring."""


def final_model(cell: CellSpec) -> str:
    """A cell's final model, the file evaluation loads."""
    return f"final-{cell.key}.pt"


def best_model(cell: CellSpec) -> str:
    """A cell's validation-best model (an auxiliary record; the endpoint is the final model)."""
    return f"best-{cell.key}.pt"


def candidate_model(cell: CellSpec, epoch: int) -> str:
    """A cell's model at one candidate epoch of a run that selects its duration: the study freezes one
    epoch per arm from every seed's validation curve, after all seeds finish, and test scores this file."""
    return f"candidate-{cell.key}-e{epoch}.pt"


def candidate_models(cell: CellSpec) -> str:
    """The glob of every candidate model of a cell (``candidate_model`` at any epoch)."""
    return f"candidate-{cell.key}-e*.pt"


def spec_path(job_folder: Path) -> Path:
    return job_folder / SPEC
