"""The project's own verbs as a replication's stages call them, in this process: build a taxonomy, import
a dataset, run or resume a study or family, re-score, find what a stage made, write a report. The same
functions `taxonomy build-cub`, `import`, `run`, `resume`, `rescore` and `report` call (no child command
is started; only the extraction runs in a child, `actions`). Every call opens the store and closes it
again, as those commands do, so the store keeps one writer at a time. Launching, resuming, re-scoring and
importing go through the front door (`study.commands`), as every front end's do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hierconsole.datasets.checklist import build_cub_files
from hierconsole.study import commands, read
from hierconsole.study.db.storage import Store
from hierconsole.study.read.families import get_family, list_families
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.vocabulary import Aggregation, Phase

Say = Callable[[str], None]
"""Where a verb's lines go (the stage's log)."""

TICK_SECONDS = 0.2
"""How often a driven orchestrator ticks (as `run` drives it)."""


def build_taxonomy(classes: Path, checklist: Path, aliases: Path | None, out: Path) -> None:
    """`taxonomy build-cub CLASSES CHECKLIST -o OUT --overwrite [--aliases A]`."""
    build_cub_files(classes, checklist, out, out.with_name(out.stem + ".report.csv"), aliases)


def import_dataset(home: Path, dataset: str, root: Path, features: Path, taxonomy: Path | None, name: str) -> None:
    """`import DATASET ROOT FEATURES [TAXONOMY] --name NAME`."""
    paths = {"root": str(root), "features": str(features), **({"taxonomy": str(taxonomy)} if taxonomy else {})}
    fs = commands.read_dataset(dataset, name, paths)
    with Store(home) as store:
        commands.import_dataset(store, fs)


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
    request = commands.LaunchRequest.parse(
        preset, dataset=dataset, values=dict(values), name=name, executor=executor, address=address
    )
    with Store(home) as store:
        launched = commands.launch(store, request)
        studies = launched.study_ids
        if launched.family_id is not None:
            members = ", ".join(m.name for m in launched.plan.members)
            say(f"family {launched.family_id}: {len(studies)} members ({members})")
        else:
            (member,) = launched.plan.members
            expected = read.expected_counts(store, studies[0])
            if expected.ok is False:
                say(f"warning: {expected.name}: {expected.evidence}")
            seeds = list(member.preset.training.seeds)
            say(f"study {studies[0]}: {member.preset.name} on {member.dataset_id}, seeds {seeds}")
        _drive(launched.orchestrator(store), studies, stop, say)
    return studies


def resume(home: Path, study_id: str, *, executor: str | None, address: str | None, stop: threading.Event, say: Say) -> None:
    """`resume STUDY`: its crashed, cancelled or failed jobs queued again and driven to the end."""
    workers = commands.Workers.parse(executor=executor, address=address)
    with Store(home) as store:
        resumed = commands.resume(store, study_id, workers, on_problem=lambda job, problem: say(f"job {job}: {problem}"))
        say(f"resumed study {study_id}")
        _drive(resumed.orchestrator, [study_id], stop, say)


def rescore(home: Path, study_id: str, aggregation: Aggregation, *, stop: threading.Event, say: Say) -> bool:
    """`rescore STUDY --aggregate A`; whether its reconciliation agrees."""
    with Store(home) as store:
        commands.rescore(store, study_id, aggregation)
        _drive(Orchestrator(store, max_parallel=1), [study_id], stop, say)
        report = commands.reconcile(store, study_id)
    say(report.message)
    return report.ok


def report_inputs(home: Path, study_id: str) -> Any:
    """What `report STUDY` shows of a study (its figures' and sections' inputs)."""
    from hierconsole.study.read.report_inputs import inputs_for

    with Store(home, read_only=True) as store:
        return inputs_for(store, study_id)


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
