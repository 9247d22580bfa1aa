"""The project's own verbs as a replication's stages call them, in this process: build a taxonomy, import
a dataset, run or resume a study or family, re-score, find what a stage made, write a report. The same
functions `taxonomy build-cub`, `import`, `run`, `resume`, `rescore` and `report` call (no child command
is started; only the extraction runs in a child, `actions`). Every call opens the store and closes it
again, as those commands do, so the store keeps one writer at a time. Kept in this one module so they
can all be switched to the command front door at once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hierconsole.config.family import load_family, resolve_family
from hierconsole.config.files import load_preset
from hierconsole.datasets.checklist import build_cub_files
from hierconsole.study import read
from hierconsole.study.analysis.audits import check_expected_counts
from hierconsole.study.db.catalog import ensure_dataset, register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.executors import LOCAL_RAY, JobExecutor, checked_executor, ray_address
from hierconsole.study.executors.devices import check_devices
from hierconsole.study.read.families import get_family, list_families
from hierconsole.study.run.families import create_family, family_splits
from hierconsole.study.run.lifecycle import advance, create_study, study_splits
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.study.run.rescoring import queue_rescore, reconcile
from hierconsole.vocabulary import Aggregation, Executor, Phase

Say = Callable[[str], None]
"""Where a verb's lines go (the stage's log)."""

TICK_SECONDS = 0.2
"""How often a driven orchestrator ticks (as `run` drives it)."""


def build_taxonomy(classes: Path, checklist: Path, aliases: Path | None, out: Path) -> None:
    """`taxonomy build-cub CLASSES CHECKLIST -o OUT --overwrite [--aliases A]`."""
    build_cub_files(classes, checklist, out, out.with_name(out.stem + ".report.csv"), aliases)


def import_dataset(home: Path, dataset: str, root: Path, features: Path, taxonomy: Path | None, name: str) -> None:
    """`import DATASET ROOT FEATURES [TAXONOMY] --name NAME`."""
    from hierconsole.datasets import import_cub, import_nabirds

    fs = import_cub(root, features, taxonomy, name=name) if taxonomy else import_nabirds(root, features, name=name)
    with Store(home) as store:
        register_dataset(store, fs)


def find(home: Path, name: str, family: bool) -> tuple[str, list[str]] | None:
    """(id, its unfinished studies) of the newest study or family of this name, or None."""
    with Store(home, read_only=True) as store:
        if family:
            rows = [f for f in list_families(store) if f.name == name]
            if not rows:
                return None
            return rows[-1].family_id, [m.study_id for m in rows[-1].members if m.phase != Phase.COMPLETE]
        studies = [s for s in read.list_studies(store) if s.name == name]
        if not studies:
            return None
        return studies[-1].study_id, [] if studies[-1].phase == Phase.COMPLETE else [studies[-1].study_id]


def audits_pass(home: Path, ref: str, family: bool) -> bool:
    """Whether every audit of a study (or a family's members) passed (what `run` and `resume` exit 1 on)."""
    with Store(home, read_only=True) as store:
        studies = [m.study_id for m in get_family(store, ref).members] if family else [ref]
        return all(c.ok for s in studies for c in read.stored_audits(store, s))


def known_datasets(home: Path) -> set[str]:
    with Store(home, read_only=True) as store:
        return {d.dataset_id for d in read.list_datasets(store)}


def rescored(home: Path, study_id: str, aggregation: str) -> bool:
    with Store(home, read_only=True) as store:
        return aggregation in read.aggregations(store, study_id)


def run_study(
    home: Path, preset: str, values: Mapping[str, Any], *, dataset: str, name: str, family: bool,
    executor: str | None, address: str | None, stop: threading.Event, say: Say,
) -> list[str]:  # fmt: skip
    """`run PRESET --dataset D --name N --set ...` of a preset or a family, driven to its end; its studies."""
    with Store(home) as store:
        if family:
            fam = replace(load_family(resolve_family(preset)).with_overrides(dict(values)), name=name)
            presets = [m.preset for m in fam.members]
            orch = _orchestrator(store, presets, executor, address)
            drawn = family_splits(store, fam, dataset)
            family_id, studies = create_family(store, fam, dataset, drawn=drawn)
            say(f"family {family_id}: {len(studies)} members ({', '.join(m.name for m in fam.members)})")
        else:
            one = load_preset(preset).with_overrides(values={**values, "study.name": name})
            orch = _orchestrator(store, [one], executor, address)
            dataset_id = ensure_dataset(store, dataset)
            studies = [create_study(store, one, dataset_id, drawn=study_splits(store, one, dataset_id))]
            expected = check_expected_counts(store, studies[0])
            if expected.ok is False:
                say(f"warning: {expected.name}: {expected.evidence}")
            say(f"study {studies[0]}: {one.name} on {dataset_id}, seeds {list(one.training.seeds)}")
        _drive(orch, studies, stop, say)
    return studies


def resume(home: Path, study_id: str, *, executor: str | None, address: str | None, stop: threading.Event, say: Say) -> None:
    """`resume STUDY`: its crashed, cancelled or failed jobs queued again and driven to the end."""
    with Store(home) as store:
        preset = read.get_study(store, study_id).preset
        orch = _orchestrator(store, [preset], executor, address, studies=[study_id], devices=False)
        orch.resume([job_id for job_id, _ in read.resumable_jobs(store, study_id)])
        advance(store, study_id)
        say(f"resumed study {study_id}")
        _drive(orch, [study_id], stop, say)


def rescore(home: Path, study_id: str, aggregation: Aggregation, *, stop: threading.Event, say: Say) -> bool:
    """`rescore STUDY --aggregate A`; whether its reconciliation agrees."""
    with Store(home) as store:
        queue_rescore(store, study_id, aggregation)
        _drive(Orchestrator(store, max_parallel=1), [study_id], stop, say)
        report = reconcile(store, study_id)
    say(report.message)
    return report.ok


def write_report(home: Path, study_id: str, path: Path) -> Path:
    """`report STUDY -o PATH --force`."""
    from hierconsole.study.read.report_inputs import inputs_for
    from hierconsole.study.report.figures import require_matplotlib
    from hierconsole.study.report.output import check_report_target, document_for, write_document

    check_report_target(path, force=True)
    require_matplotlib()
    with Store(home, read_only=True) as store:
        inputs = inputs_for(store, study_id)
    return write_document(document_for(inputs), path, force=True)


def _orchestrator(
    store: Store, presets: list, executor: str | None, address: str | None,
    studies: list[str] | None = None, devices: bool = True,
) -> Orchestrator:  # fmt: skip
    """As `run` makes it: the first preset's parallel jobs, on the executor asked for, the devices checked
    (`studies` None: the studies are set once created)."""
    parallel = presets[0].compute.max_parallel_jobs or 1
    checks = [(p.compute.device, "compute.device") for p in presets] if devices else [("cpu", "compute.device")]
    jobs: JobExecutor | None = None
    if checked_executor(executor, address) == Executor.LOCAL:
        for device, source in checks:
            check_devices(device, None, source=source)
    else:
        from hierconsole.study.executors.ray_cluster import RayExecutor  # imports ray: only when asked for

        where = ray_address(address)
        threads = max(p.compute.threads_per_worker for p in presets)
        local = where == LOCAL_RAY
        jobs = RayExecutor(
            store.home, where, num_cpus=max(os.cpu_count() or 1, parallel * threads) if local else None,
            parallel=parallel if local else None,
        )  # fmt: skip
        for device, source in checks:
            jobs.check_device(device, source)
    return Orchestrator(store, max_parallel=parallel, studies=studies, executor=jobs)


def _drive(orch: Orchestrator, studies: list[str], stop: threading.Event, say: Say) -> None:
    """Tick until the studies' jobs are done, or `stop` is set (then cancel them: resumable)."""
    orch.studies = list(studies)
    try:
        while True:
            if stop.is_set():
                say("stopped: cancelling jobs (the next replicate resumes them)")
                orch.shutdown(cancel=True)
                return
            orch.tick()
            if not orch.busy(studies):
                return
            time.sleep(TICK_SECONDS)
    finally:
        orch.close_executors()
