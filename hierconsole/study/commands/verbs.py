"""The verbs besides launching: resume, cancel, delete, re-score a study, and import or delete a dataset; each
checks its inputs here, once, for every front end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hierconsole.errors import HierconsoleError
from hierconsole.names import check_name
from hierconsole.study import read
from hierconsole.study.commands.launching import Workers, open_executor
from hierconsole.study.db import catalog
from hierconsole.study.db.catalog import DatasetInfo, register_dataset
from hierconsole.study.run.lifecycle import advance, delete_study, record_audits
from hierconsole.study.run.orchestrator import Orchestrator, ProblemCallback
from hierconsole.study.run.rescoring import Reconciliation, queue_rescore, reconcile
from hierconsole.vocabulary import Aggregation, Phase

if TYPE_CHECKING:
    from hierconsole.datasets import FeatureSet
    from hierconsole.study.analysis.audits.result import Check
    from hierconsole.study.db.storage import Store

__all__ = ["Reconciliation", "reconcile"]  # what a re-score's caller reads once its jobs have run


@dataclass
class Resumed:
    """A resume under way: the studies it drives, the workers at once, and the orchestrator that has
    already queued their resumable jobs again (the caller drives it, then closes its executors)."""

    studies: list[str]
    parallel: int
    orchestrator: Orchestrator


def resume(
    store: Store, study: str | None, workers: Workers, *, on_problem: ProblemCallback
) -> Resumed:
    """Queue crashed, cancelled and failed jobs again (of `study`, else of every study); queued and
    orphaned running ones are driven too. The executor is opened, and a study whose jobs all ended catches
    up on its phase."""
    only = read.resolve_study(store, study) if study else None
    # The same studies before and after the orchestrator settles running jobs (a dead worker's job
    # turns crashed: resumable instead of active) and after the resumable ones are queued again.
    studies = sorted(
        {s for _, s in read.resumable_jobs(store, only)}
        | {s for _, s in read.active_jobs(store, only)}
        | set(read.unfinished_studies(store, only))
    )
    # Not told --parallel: the most that the resumed studies' presets asked for (as registered), as their
    # `run` gave them; 1 when there is none.
    parallel = workers.parallel or max(
        (read.get_study(store, s).preset.compute.max_parallel_jobs for s in studies), default=1
    )
    executor = open_executor(store, workers, parallel=parallel, threads=read.job_threads(store), devices=[("cpu", "--gpus")])
    # Constructing it settles jobs an earlier orchestrator left running (their events replayed).
    orch = Orchestrator(
        store,
        max_parallel=parallel,
        gpus=list(workers.gpus) if workers.gpus else None,
        executor=executor,
        studies=[only] if only else None,  # `resume STUDY` launches that study's jobs, no other's
        on_problem=on_problem,
    )
    try:
        orch.resume([job_id for job_id, _ in read.resumable_jobs(store, only)])
        for study_id in studies:
            advance(store, study_id)  # a study whose jobs all ended may have a phase to catch up on
    except BaseException:
        orch.close_executors()
        raise
    return Resumed(studies, parallel, orch)


def cancel(store: Store, study_id: str, *, on_problem: ProblemCallback) -> int:
    """Cancel a study's queued and orphaned running jobs (they stay resumable); how many."""
    orch = Orchestrator(store, on_problem=on_problem)
    ids = [job_id for job_id, _ in read.active_jobs(store, study_id)]
    for job_id in ids:
        orch.cancel(job_id)
    orch.shutdown(cancel=True)
    orch.close_executors()
    return len(ids)


def delete(store: Store, study_id: str) -> None:
    """Delete a study's rows and artifacts; refused while any of its jobs is queued or running."""
    delete_study(store, study_id)


def rescore(store: Store, study: str, aggregation: Aggregation) -> str:
    """Queue a re-score of a complete study's test embeddings under `aggregation` (and the reconciliation
    under its registered one); the study's id. `reconcile` reads the outcome once the jobs have run."""
    study_id = read.resolve_study(store, study)
    phase = read.get_study(store, study_id).phase
    if phase != Phase.COMPLETE:
        raise HierconsoleError(f"study {study_id} is {phase}; only a complete study can be re-scored")
    queue_rescore(store, study_id, aggregation)
    return study_id


IMPORT_SOURCES = ("generic", "cub", "nabirds", "inat", "synthetic")


def read_dataset(
    source: str,
    name: str,
    paths: Mapping[str, str],
    *,
    level_names: Sequence[str] | None = None,
    dim: int | None = None,
    levels: Sequence[str] | None = None,
) -> FeatureSet:
    """A dataset read from its files by the importer of `source` (generic: features, labels, taxonomy;
    cub: root, features, taxonomy; nabirds: root, features; inat: features, train[, val] with the ranks
    `levels`; synthetic: `name` is a built-in set). The name is checked before any file is read; nothing
    is written."""
    if source == "synthetic":
        from hierconsole.datasets import make_synthetic
        from hierconsole.datasets.synthetic import BUILT_IN

        return make_synthetic(BUILT_IN[name])
    check_name(name, "--name")
    p = paths
    if source == "generic":
        from hierconsole.datasets import import_generic

        return import_generic(
            p["features"], p["labels"], p["taxonomy"], name=name, level_names=level_names, expected_dim=dim
        )
    if source == "cub":
        from hierconsole.datasets import import_cub

        return import_cub(p["root"], p["features"], p["taxonomy"], name=name)
    if source == "nabirds":
        from hierconsole.datasets import import_nabirds

        return import_nabirds(p["root"], p["features"], name=name)
    if source == "inat":
        from hierconsole.datasets.inat import import_inat, parse_levels

        # The ranks are checked as the CLI checks --levels, from whichever front end they come.
        ranks = parse_levels(",".join(levels)) if levels else None
        return import_inat(p["features"], p["train"], p.get("val"), name=name, levels=ranks, expected_dim=dim)
    raise HierconsoleError(f"{source!r} is not an import source; give one of {', '.join(IMPORT_SOURCES)}")


def import_dataset(store: Store, fs: FeatureSet, *, replace: bool = False) -> DatasetInfo:
    """Register a dataset read by `read_dataset`: landed completely or not at all."""
    return register_dataset(store, fs, replace=replace)


def delete_dataset(store: Store, dataset_id: str) -> None:
    """Remove a dataset's rows and folder; refused while any study uses it (its runs depend on the data)."""
    catalog.delete_dataset(store, dataset_id)


def save_audits(store: Store, study_id: str, checks: Sequence[Check]) -> None:
    """Keep rechecked audits (`audit --recheck`): computed on a read-only store, saved where it is writable."""
    record_audits(store, study_id, checks)
