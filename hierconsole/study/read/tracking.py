"""A study's final runs as an experiment tracker records them (`hierconsole export mlflow`): one record per
final cell (seed x arm) and per baseline, with the frozen preset, the per-epoch history and the
official-test numbers, in plain types that no tracker's package is needed to build.

The test numbers are the per-seed table's (`read.per_seed`, `read.baselines`): the Q/G perturbations of a
seed averaged, exactly what `effects` and `export` start from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from hierconsole.config.family import flatten
from hierconsole.factorial import cells_in_order
from hierconsole.study.db.ids import baseline_run_id, evaluate_job_id
from hierconsole.study.db.records import get_study, resolve_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read.audits import current_audits
from hierconsole.study.read.results import aggregations, baselines, evaluated_per_seed, registered_aggregation
from hierconsole.vocabulary import BASELINE_SEED, TRAINED_BASELINES, UNTRAINED_BASELINES, JobKind

TRAIN_METRICS: dict[str, str] = {
    "train_loss": "train/loss",
    "updates": "train/updates",
    "seconds": "train/seconds",
}
"""Column of the store's `epochs` table -> the per-epoch metric it is logged as (step = epoch)."""
VAL_PREFIX = "val/"
TEST_PREFIX = "test/"
RUN_PREFIX = "run/"
RUN_METRICS: tuple[str, ...] = ("trainable_params", "updates", "best_epoch", "best_score", "max_norm")
"""Columns of a final cell's `runs` row logged as `run/<column>` (where not null)."""


def metric_key(prefix: str, column: str) -> str:
    """A tracker-safe metric name: trackers allow letters, digits and `_ - . / : space`, so a per-seed
    column such as `leaf_R@10` becomes `test/leaf_R_at_10` (`leaf_mAP` stays `test/leaf_mAP`)."""
    return prefix + column.replace("@", "_at_")


def param_value(value: object) -> str:
    """A preset value as a parameter: strings as they are, anything else (numbers, lists, null) as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class TrackedRun:
    key: str
    """The store's run id (`<study>/final-s42/H_S`, `<study>/evaluate/frozen`): the tag that finds this
    record's tracker run again, so a second export updates it instead of adding one."""
    name: str
    state: str
    """The job's state (`finished`, `failed`, ...)."""
    params: dict[str, str]
    tags: dict[str, str]
    steps: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """metric -> (epoch, value) in epoch order."""
    final: dict[str, float] = field(default_factory=dict)
    """The official-test numbers (and the run's counts), logged once per export."""
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class TrackedStudy:
    study_id: str
    runs: list[TrackedRun]


def _test_numbers(table: pl.DataFrame | None, prefix: str) -> dict[tuple[str, int], dict[str, float]]:
    """(arm, seed) -> metric key -> value, from a per-seed (or baselines) table."""
    if table is None:
        return {}
    columns = [c for c in table.columns if c not in ("arm", "seed")]
    return {
        (r["arm"], int(r["seed"])): {metric_key(prefix, c): float(r[c]) for c in columns if r[c] is not None}
        for r in table.iter_rows(named=True)
    }


def _all_test_numbers(store: Store, study_id: str) -> dict[tuple[str, int], dict[str, float]]:
    """Every aggregation with stored test metrics: the registered one as `test/<metric>`, a post-hoc
    re-score as `test/<aggregation>/<metric>`. While an evaluation runs, only the seeds scored on every
    Q/G perturbation (`evaluated_per_seed`): a half-scored seed gets its numbers on the next export."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    registered = registered_aggregation(store, study_id)
    for agg in aggregations(store, study_id):
        prefix = TEST_PREFIX if agg == registered else f"{TEST_PREFIX}{agg}/"
        for table in (baselines(store, study_id, agg), evaluated_per_seed(store, study_id, agg)):
            for cell, numbers in _test_numbers(table, prefix).items():
                out.setdefault(cell, {}).update(numbers)
    return out


def _steps(store: Store, study_id: str, registered: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """run id -> metric -> (epoch, value): the training losses, updates and times per epoch, and the
    validation metrics of the registered aggregation where the study scored validation."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    columns = ", ".join(f"e.{c}" for c in TRAIN_METRICS)
    for run_id, epoch, *values in store.rows(
        f"SELECT e.run_id, e.epoch, {columns} FROM epochs e JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? ORDER BY e.run_id, e.epoch",
        [study_id, JobKind.FINAL],
    ):
        for name, value in zip(TRAIN_METRICS.values(), values, strict=True):
            if value is not None:
                out.setdefault(run_id, {}).setdefault(name, []).append((int(epoch), float(value)))
    for run_id, epoch, level, metric, value in store.rows(
        "SELECT v.run_id, v.epoch, v.level, v.metric, v.value FROM val_metrics v JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? AND v.aggregation = ? AND v.value IS NOT NULL "
        "ORDER BY v.run_id, v.level, v.metric, v.epoch",
        [study_id, JobKind.FINAL, registered],
    ):
        key = metric_key(VAL_PREFIX, f"{level}_{metric}")
        out.setdefault(run_id, {}).setdefault(key, []).append((int(epoch), float(value)))
    return out


def _study_tags(store: Store, study_id: str) -> dict[str, str]:
    """What every run of the study carries: its hashes, phase and each audit's result and evidence."""
    info = get_study(store, study_id)
    lock = store.value("SELECT lock_sha256 FROM studies WHERE study_id = ?", [study_id])
    tags = {
        "hierconsole.study": study_id,
        "hierconsole.study_name": info.name,
        "hierconsole.dataset": info.dataset_id,
        "hierconsole.phase": str(info.phase),
        "hierconsole.preset_sha256": info.preset_sha256,
        "hierconsole.lock_sha256": lock or "",
    }
    checks, recorded = current_audits(store, study_id)
    tags["hierconsole.audits_recorded"] = "true" if recorded else "false"
    for check in checks:
        result = "pending" if check.ok is None else "pass" if check.ok else "fail"
        tags[f"hierconsole.audit.{check.name}"] = result
        tags[f"hierconsole.audit.{check.name}.evidence"] = check.evidence
    return tags


def tracked_study(store: Store, study: str) -> TrackedStudy:
    """The final cells (and the baselines the study scored) of a study, by id, prefix or name."""
    study_id = resolve_study(store, study)
    info = get_study(store, study_id)
    params = {key: param_value(value) for key, value in flatten(info.preset.to_dict()).items()}
    tags = _study_tags(store, study_id)
    test = _all_test_numbers(store, study_id)
    steps = _steps(store, study_id, info.preset.evaluation.aggregation)
    arms = [r[0] for r in store.rows("SELECT DISTINCT arm FROM runs WHERE study_id = ?", [study_id])]
    order = {arm: i for i, arm in enumerate((*cells_in_order(arms), *TRAINED_BASELINES))}
    runs: list[TrackedRun] = []
    rows = store.dicts(
        "SELECT r.run_id, r.seed, r.arm, r.geometry, r.loss, r.tau, r.trainable_params, r.updates, "
        "r.best_epoch, r.best_score, r.max_norm, r.init_sha256, r.final_sha256, j.state, j.started_at, "
        "j.finished_at FROM runs r JOIN jobs j USING (job_id) WHERE r.study_id = ? AND r.kind = ?",
        [study_id, JobKind.FINAL],
    )
    for r in sorted(rows, key=lambda r: (r["seed"], order.get(r["arm"], len(order)), r["arm"])):
        cell = {"arm": r["arm"], "geometry": r["geometry"], "loss": r["loss"], "seed": str(r["seed"])}
        if r["tau"] is not None:
            cell["tau"] = param_value(float(r["tau"]))
        final = dict(test.get((r["arm"], int(r["seed"])), {}))
        for column in RUN_METRICS:
            if r[column] is not None:
                final[RUN_PREFIX + column] = float(r[column])
        run_tags = {
            **tags,
            "hierconsole.run_key": r["run_id"],
            "hierconsole.kind": "baseline" if r["arm"] in TRAINED_BASELINES else "cell",
            "hierconsole.init_sha256": r["init_sha256"] or "",
            "hierconsole.final_sha256": r["final_sha256"] or "",
        }
        runs.append(
            TrackedRun(
                key=r["run_id"],
                name=f"s{r['seed']} {r['arm']}",
                state=r["state"],
                params={**params, **cell},
                tags=run_tags,
                steps=steps.get(r["run_id"], {}),
                final=final,
                started_at=r["started_at"],
                finished_at=r["finished_at"],
            )
        )
    evaluation = store.dicts(
        "SELECT state, started_at, finished_at FROM jobs WHERE job_id = ?", [evaluate_job_id(study_id)]
    )
    for arm in UNTRAINED_BASELINES:
        numbers = test.get((arm, BASELINE_SEED))
        if numbers is None or not evaluation:  # not among the study's baselines, or not scored yet
            continue
        key = baseline_run_id(study_id, arm)
        runs.append(
            TrackedRun(
                key=key,
                name=arm,
                state=evaluation[0]["state"],
                params={**params, "arm": arm},
                tags={**tags, "hierconsole.run_key": key, "hierconsole.kind": "baseline"},
                final=numbers,
                started_at=evaluation[0]["started_at"],
                finished_at=evaluation[0]["finished_at"],
            )
        )
    return TrackedStudy(study_id, runs)
