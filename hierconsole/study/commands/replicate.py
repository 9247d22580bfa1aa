"""The `replicate` verb: the inputs checked and hashed, the replication's stage graph (`study.replication`)
planned from the records the home holds, and either the plan with its estimate (a dry run) or the stages
run until none is left, each through the front door's own verbs (`replicate_actions`, `replicate_verbs`).
The front end parses options and prints what this returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hierconsole.errors import HierconsoleError
from hierconsole.locations import db_path, resolve_home
from hierconsole.study.commands import replicate_verbs as verbs
from hierconsole.study.commands.replicate_actions import Replication, StageLog
from hierconsole.study.db.calibrations import put_replication_work
from hierconsole.study.db.storage import Store
from hierconsole.study.replication.calibration import (
    CALIBRATION_IMAGES,
    Calibrated,
    described,
    ensure_calibration,
    measure,
)
from hierconsole.study.replication.costs import Estimate, StageWork
from hierconsole.study.replication.estimate import replication_estimate
from hierconsole.study.replication.graph import (
    Decision,
    Planned,
    StageRecord,
    StageState,
    dependents,
    plan,
)
from hierconsole.study.replication.hashes import file_sha256, text_sha256
from hierconsole.study.replication.inputs import DEFAULT_SEED, given_datasets, replication_inputs
from hierconsole.study.replication.runner import Outcome, load_records, run_replication
from hierconsole.study.replication.stages import (
    CARRIED_INPUT,
    CUB,
    DATASETS,
    DEFAULT_STAGES_AT_ONCE,
    NABIRDS,
    PAPER,
    REPORT_STAGE,
    SCALES,
    SMOKE,
    STUDY_STAGES,
    TABLES_STAGE,
    factorial_stages,
    paper_stages,
    replication_name,
)
from hierconsole.study.replication.work import (
    LIGHT_STAGES,
    calibration_run,
    calibration_shape,
    dataset_size,
    run_presets,
    sample_images,
    stage_work,
)

# What `replicate` reads of a replication besides running it, through the front door (the console reads
# `replication_plan`): front ends never import study.replication itself (pyproject's front-end contract).
__all__ = [
    "DATASETS", "DEFAULT_SEED", "DEFAULT_STAGES_AT_ONCE", "LIGHT_STAGES", "PAPER", "SCALES", "Decision", "DryRun",
    "Prepared", "Writers", "datasets_of_stages", "dry_run", "prepare", "run",
]  # fmt: skip

@dataclass(frozen=True)
class Writers:
    """How a replication's tables and reports leave the tool: present/'s writers, handed in by the front end
    (study/ is the domain only and never imports the presentation)."""

    tables: Callable[..., Mapping[str, Path]]
    """(rows of (table id, title, frame), omitted tables' reasons, folder, comparable=) -> file name -> path."""
    report: Callable[[Any, Path], Path]
    """(a study's report inputs, path) -> the written report's path."""


@dataclass
class Prepared:
    """A replication as planned from its inputs and the records the home holds; nothing created yet."""

    replication_id: str
    home: Path
    stages: list
    external: dict[str, str]
    records: dict[str, StageRecord]
    datasets: frozenset[str]
    carried: dict[str, Mapping[str, str]]
    tables_out: Path
    gone: dict[str, str]
    """Derived stage -> its first file missing or changed in tables_out: it runs again."""
    redo: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DryRun:
    planned: list[Planned]
    work: dict[str, StageWork]
    calibrated: Calibrated
    estimate: Estimate


def prepare(options: Any, home_option: str | None) -> Prepared:
    """Validate and hash every input (nothing is created before that succeeds), then read the records."""
    external = replication_inputs(options)
    datasets = given_datasets(options)
    names = {s.name for s in paper_stages(datasets)}
    unknown = sorted(set(options.redo) - names)
    if unknown:
        raise HierconsoleError(f"--redo {', '.join(unknown)}: not a stage of this replication ({', '.join(sorted(names))})")
    # A model named by its architecture, or by its config file's name (its hash is the input).
    model = options.model if external["model"] == options.model else Path(options.model).stem
    rid = replication_name(model, options.scale, options.seed)
    if options.dry_run and not db_path(resolve_home(home_option, create=False)).exists():
        records: dict[str, StageRecord] = {}  # a replication may start from no home: nothing is done yet
    else:
        # Made (or migrated) before the first record, so every read below finds a store.
        with Store(resolve_home(home_option), read_only=options.dry_run) as store:
            records = load_records(store, rid)
    carried = carried_outputs(records, datasets)
    if carried:
        external[CARRIED_INPUT] = text_sha256(json.dumps(carried, sort_keys=True))
    home = resolve_home(home_option)
    tables_out = (options.out or home / "replications" / rid / "tables").resolve()
    gone = outputs_gone(records, tables_out)
    stages = paper_stages(datasets, carried=bool(carried))
    return Prepared(rid, home, stages, external, records, datasets, carried, tables_out, gone, [*options.redo, *gone])


def dry_run(options: Any, p: Prepared) -> DryRun:
    work, calibrated = plan_work(options, p)
    planned = plan(p.stages, p.external, p.records, dependents(p.stages, p.redo))
    left = [s.stage.name for s in planned if s.decision in (Decision.RUN, Decision.WAITING)]
    with Store(p.home, read_only=True) as store:
        guess = replication_estimate(store, p.replication_id, left)
    assert guess is not None  # plan_work stored the work and its calibration
    return DryRun(planned, work, calibrated, guess)


def plan_work(options: Any, p: Prepared) -> tuple[dict[str, StageWork], Calibrated]:
    """Count each stage's work from its plan and price it with this machine's calibration (stored, else
    measured now in this process and stored); both recorded in the store, which the console's estimate
    reads (no dataset or study is created)."""
    roots = {d: Path(r) for d, r in ((CUB, options.cub), (NABIRDS, options.nabirds)) if r is not None}
    sizes = {d: dataset_size(root) for d, root in roots.items()}
    work = stage_work(p.stages, options.scale, sizes, builds_taxonomy=options.checklist is not None)
    run = calibration_run(sizes)
    shape = calibration_shape(run, options.scale, sizes[run.dataset])
    (preset,) = run_presets(run, options.scale)
    images = sample_images(roots[run.dataset], CALIBRATION_IMAGES + 1)

    def measured() -> Any:
        return measure(preset, options.model, shape["gallery"], images)

    calibrated = ensure_calibration(lambda: Store(p.home), described(p.external["model"], shape), measured)
    with Store(p.home) as store:
        put_replication_work(store, p.replication_id, calibrated.key, {n: w.to_json() for n, w in work.items()})
    return work, calibrated


def run(
    options: Any, p: Prepared, *, on_stage: Callable[[str, bool], None], on_warning: Callable[[str], None],
    logs: dict[str, StageLog], writers: Writers,
) -> Outcome:
    """Run every stage the plan says to run; ``logs`` fills with each stage's log as it starts."""
    from hierconsole.study.read.paper_tables import replication_tables

    plan_work(options, p)  # what the console's estimate reads
    folder = p.home / "replications" / p.replication_id
    rep = Replication(options, p.home, p.replication_id, folder, p.external, logs, on_warning)
    given, kept = datasets_of(p.stages), datasets_of_stages(p.carried)
    absent = {
        stage: f"no --{dataset} folder given"
        for dataset in DATASETS if dataset not in given for stage in STUDY_STAGES[dataset] if stage not in p.carried
    }  # fmt: skip

    def tables(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        comparable = options.scale != SMOKE
        with Store(p.home, read_only=True) as store:
            measured, omitted = replication_tables(store, {**p.carried, **upstream}, comparable=comparable, absent=absent)
        rows = [(t.table_id, t.title, t.frame) for t in measured]
        written = writers.tables(rows, omitted, p.tables_out, comparable=comparable)
        return {name: file_sha256(path) for name, path in sorted(written.items())}

    def report(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        for leftover in p.tables_out.glob(".report-*.tmp"):  # a report killed mid-write
            leftover.unlink()
        for dataset in set(DATASETS) - given - kept:  # left out of this replication now: its report would be stale
            (p.tables_out / f"report-{dataset}.html").unlink(missing_ok=True)
        made: dict[str, str] = {}
        for stage, dataset in factorial_stages(given).items():
            (study_id,) = upstream[stage].values()
            path = writers.report(verbs.report_inputs(p.home, study_id), p.tables_out / f"report-{dataset}.html")
            made[path.name] = file_sha256(path)
        return made

    actions = rep.actions([s.name for s in p.stages], tables, report)
    try:
        outcome = run_replication(
            lambda: Store(p.home), p.replication_id, p.stages, p.external, actions, redo=p.redo,
            on_stage=on_stage, at_once=options.stages_at_once, on_failure=rep.stop, timed=rep.timed,
        )  # fmt: skip
    except BaseException:
        rep.stop()  # Ctrl-C, SIGTERM or a failed stage: the running stages' jobs are cancelled (resumable)
        raise
    return outcome


def carried_outputs(records: Mapping[str, StageRecord], given: frozenset[str]) -> dict[str, Mapping[str, str]]:
    """The recorded outputs of the study stages of each dataset not given whose study stages all finished
    in this replication: their studies fill the tables as if the dataset had been given again (a dataset
    run on its own after the other keeps the other's tables)."""
    carried: dict[str, Mapping[str, str]] = {}
    for dataset in DATASETS:
        stages = STUDY_STAGES[dataset]
        if dataset not in given and all(s in records and records[s].state == StageState.DONE for s in stages):
            carried.update({s: records[s].outputs for s in stages})
    return carried


def outputs_gone(records: Mapping[str, StageRecord], tables_out: Path) -> dict[str, str]:
    """Derived stage -> the first of its recorded files that is missing from ``tables_out`` or differs from
    what it wrote (deleted, edited, or another --out): that stage runs again."""
    gone: dict[str, str] = {}
    for stage in (TABLES_STAGE, REPORT_STAGE):
        record = records.get(stage)
        if record is None or record.state != StageState.DONE:
            continue
        for name, digest in sorted(record.outputs.items()):
            path = tables_out / name
            if not path.is_file() or file_sha256(path) != digest:
                gone[stage] = name
                break
    return gone


def datasets_of(stages: list) -> frozenset[str]:
    return datasets_of_stages(s.name for s in stages if s.name.startswith("import-"))


def datasets_of_stages(names: Iterable[str]) -> frozenset[str]:
    """The datasets these stage names (`<step>-<dataset>`) belong to."""
    return frozenset(name.partition("-")[2] for name in names)
