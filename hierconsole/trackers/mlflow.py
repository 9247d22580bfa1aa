"""A study's final runs logged to an MLflow tracking store: one experiment per study, one MLflow run per
tracked run (`study.read.tracking`), found again by its `hierconsole.run_key` tag.

Exporting twice never duplicates: a run already there is updated in place (tags set again, metrics logged
only where their value changed or their step is new). MLflow keeps a parameter's first value for good, so
a parameter that differs from what the store now says stops the export before anything is written.

MLflow is an optional extra (`pip install 'hierconsole[mlflow]'`), imported only here, when an export runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from hierconsole.errors import HierconsoleError
from hierconsole.study.read.tracking import TrackedRun, TrackedStudy
from hierconsole.vocabulary import JobState

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

INSTALL = "pip install 'hierconsole[mlflow]'"
RUN_KEY = "hierconsole.run_key"
"""The tag naming the store's run id: how a second export finds the MLflow run it made."""

STATUS: dict[str, str] = {
    JobState.QUEUED: "SCHEDULED",
    JobState.RUNNING: "RUNNING",
    JobState.FINISHED: "FINISHED",
    JobState.FAILED: "FAILED",
    JobState.CRASHED: "FAILED",
    JobState.CANCELLED: "KILLED",
}
"""A job's state -> the MLflow run status it is shown with."""
TERMINAL = {"FINISHED", "FAILED", "KILLED"}

# MLflow's own batch limits (mlflow.utils.validation): at most 100 params and 100 tags, 1000 metrics and
# 1000 entities in all per log_batch call. Tag values beyond 5000 characters (MLflow 2's limit) and parameter
# values beyond 6000 are cut here, as MLflow would store them, so that a second export compares like with like.
BATCH_PARAMS_TAGS = 100
BATCH_ENTITIES = 1000
TAG_CHARS = 5000
PARAM_CHARS = 6000

T = TypeVar("T")


@dataclass(frozen=True)
class ExportSummary:
    experiment_id: str
    experiment_name: str
    created: int
    updated: int
    metrics_logged: int
    """Metric values written this time (0 on an export that found everything already there)."""


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _first_line(exc: BaseException) -> str:
    """The first sentence of a backend's message (MLflow's run on for lines, with links and advice)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.split(". ", 1)[0].rstrip(".")


def _millis(at: datetime | None) -> int | None:
    """A store timestamp (naive, UTC) as MLflow's epoch milliseconds."""
    return None if at is None else int(at.replace(tzinfo=UTC).timestamp() * 1000)


def _connect(tracking_uri: str) -> MlflowClient:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise HierconsoleError(f"exporting to MLflow needs the mlflow extra: {INSTALL}") from None
    try:
        return MlflowClient(tracking_uri=tracking_uri)
    # What a backend raises for a URI it cannot open varies (MlflowException, SQLAlchemy's errors, OSError):
    # each is the user's URI to fix, told in one line.
    except Exception as exc:
        raise HierconsoleError(
            f"--tracking-uri {tracking_uri}: MLflow cannot open it ({_first_line(exc)})\n"
            "  fix: give a tracking server (http://HOST:PORT) or a database such as sqlite:///PATH/mlflow.db"
            + (
                " (or set MLFLOW_ALLOW_FILE_STORE=true for MLflow's file store)"
                if "MLFLOW_ALLOW_FILE_STORE" in str(exc)
                else ""
            )
        ) from None


def _experiment(client: MlflowClient, name: str, tracking_uri: str) -> str:
    try:
        found = client.get_experiment_by_name(name)
        if found is None:
            return client.create_experiment(name)
    except Exception as exc:  # as in _connect: the backend's own error, reported in one line
        raise HierconsoleError(f"--tracking-uri {tracking_uri}: {_first_line(exc)}") from None
    if found.lifecycle_stage != "active":
        raise HierconsoleError(
            f"MLflow experiment {name!r} at {tracking_uri} is deleted\n"
            f"  fix: restore it (`mlflow experiments restore --experiment-id {found.experiment_id}`) or "
            "remove it for good (`mlflow gc`), then export again"
        )
    return str(found.experiment_id)


def _existing_runs(client: MlflowClient, experiment_id: str) -> dict[str, Run]:
    """run key -> the active MLflow run carrying it (the oldest, should several)."""
    out: dict[str, Run] = {}
    token: str | None = None
    while True:
        page = client.search_runs([experiment_id], order_by=["attributes.start_time ASC"], page_token=token)
        for run in page:
            key = run.data.tags.get(RUN_KEY)
            if key is not None and key not in out:
                out[key] = run
        token = page.token
        if not token:
            return out


def _check_params(runs: Sequence[TrackedRun], existing: dict[str, Run], experiment: str) -> None:
    """MLflow never changes a logged parameter: refuse, before writing, a run whose parameters differ."""
    for run in runs:
        found = existing.get(run.key)
        if found is None:
            continue
        changed = sorted(
            k for k, v in run.params.items() if k in found.data.params and found.data.params[k] != v
        )
        if changed:
            raise HierconsoleError(
                f"MLflow run {found.info.run_id} ({run.key}) in experiment {experiment!r} holds other values "
                f"for parameter(s) {', '.join(changed[:5])}; MLflow cannot change a logged parameter\n"
                "  fix: delete that run (or the experiment) in MLflow, then export again"
            )


def _new_metrics(client: MlflowClient, found: Run | None, run: TrackedRun, now: int) -> list[Any]:
    """The metric values the MLflow run lacks: steps not logged with that value, final numbers that differ
    from the latest logged."""
    from mlflow.entities import Metric

    logged = {} if found is None else found.data.metrics
    out = []
    for key, points in run.steps.items():
        have: set[tuple[int, float]] = set()
        if found is not None and key in logged:
            have = {(m.step, m.value) for m in client.get_metric_history(found.info.run_id, key)}
        out += [Metric(key, value, now, step) for step, value in points if (step, value) not in have]
    out += [Metric(key, value, now, 0) for key, value in run.final.items() if logged.get(key) != value]
    return out


def _log(
    client: MlflowClient, run_id: str, params: dict[str, str], tags: dict[str, str], metrics: list
) -> None:
    from mlflow.entities import Param, RunTag

    param_list = [Param(k, v) for k, v in params.items()]
    tag_list = [RunTag(k, v[:TAG_CHARS]) for k, v in tags.items()]
    for chunk in _chunks(param_list, BATCH_PARAMS_TAGS):
        client.log_batch(run_id, params=chunk)
    for tag_chunk in _chunks(tag_list, BATCH_PARAMS_TAGS):
        client.log_batch(run_id, tags=tag_chunk)
    for metric_chunk in _chunks(metrics, BATCH_ENTITIES):
        client.log_batch(run_id, metrics=metric_chunk)


def export_study(study: TrackedStudy, tracking_uri: str) -> ExportSummary:
    """Log every tracked run of the study to the experiment named after its id (created if missing)."""
    client = _connect(tracking_uri)  # first: it says how to install MLflow where it is missing
    from mlflow.exceptions import MlflowException

    try:
        return _export(client, study, tracking_uri)
    except MlflowException as exc:  # a server that went away or refused a value: one line, no traceback
        raise HierconsoleError(f"--tracking-uri {tracking_uri}: {_first_line(exc)}") from None


def _export(client: MlflowClient, study: TrackedStudy, tracking_uri: str) -> ExportSummary:
    experiment_id = _experiment(client, study.study_id, tracking_uri)
    existing = _existing_runs(client, experiment_id)
    runs = [replace(r, params={k: v[:PARAM_CHARS] for k, v in r.params.items()}) for r in study.runs]
    _check_params(runs, existing, study.study_id)
    created = updated = logged = 0
    now = int(time.time() * 1000)
    for run in runs:
        found = existing.get(run.key)
        status = STATUS.get(run.state, "RUNNING")
        if found is None:
            run_id = client.create_run(
                experiment_id, start_time=_millis(run.started_at), tags={RUN_KEY: run.key}, run_name=run.name
            ).info.run_id
            params = run.params
            created += 1
        else:
            run_id = found.info.run_id
            params = {k: v for k, v in run.params.items() if k not in found.data.params}
            updated += 1
        metrics = _new_metrics(client, found, run, now)
        _log(client, run_id, params, run.tags, metrics)
        logged += len(metrics)
        if status in TERMINAL:
            client.set_terminated(run_id, status, end_time=_millis(run.finished_at))
        else:
            client.update_run(run_id, status=status, name=run.name)
    return ExportSummary(experiment_id, study.study_id, created, updated, logged)
