"""`hierconsole replicate`: the paper from the dataset folders to every table beside the paper's values.

The replication is a stage graph (`study.run.paper_stages`) recorded in the store; each stage is keyed by
its inputs' content hashes, so a re-run continues where the last one stopped, a finished stage is never
redone, and a changed input is named (its stage and dependents re-run with `--redo STAGE`). `--dry-run`
prints the plan and the time left from the stages' recorded wall times, and creates nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from hierconsole.cli.arguments import positive_int
from hierconsole.cli.reading import open_for_reading
from hierconsole.cli.replicate_inputs import DEFAULT_SEED, given_datasets, replication_inputs
from hierconsole.errors import HierconsoleError
from hierconsole.extraction.architectures import ARCHITECTURES, DEFAULT_MODEL
from hierconsole.locations import db_path, resolve_home
from hierconsole.plurals import counted
from hierconsole.study.analysis.stage_costs import Estimate, StageWork, UnitCosts, estimate
from hierconsole.study.run.calibration import (
    CALIBRATION_IMAGES,
    Calibrated,
    described,
    ensure_calibration,
    measure,
)
from hierconsole.study.run.input_hashes import file_sha256, text_sha256
from hierconsole.study.run.paper_stages import (
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
    assignment_list,
    factorial_stages,
    paper_stages,
    replication_name,
    run_overrides,
)
from hierconsole.study.run.replication import load_records
from hierconsole.study.run.stage_graph import Decision, Planned, StageRecord, StageState, dependents, plan
from hierconsole.study.run.stage_work import (
    LIGHT_STAGES,
    calibration_run,
    calibration_shape,
    dataset_size,
    sample_images,
    stage_work,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replicate",
        help="reproduce the paper: extract, import, every study and family, the tables and the report",
        description="Run the paper's pipeline (extract, taxonomy, import, factorials with tuning, families, "
        "baselines, post-hoc re-scoring, tables, report) from the dataset folders. Each stage is keyed by its "
        "inputs' content hashes and recorded in the store: a re-run continues where the last stopped and never "
        "redoes a finished stage. Either dataset may be left out (its tables are then named as omitted).",
    )
    p.add_argument("--cub", metavar="DIR", type=Path, help="the CUB_200_2011 folder")
    p.add_argument("--nabirds", metavar="DIR", type=Path, help="the nabirds folder")
    p.add_argument("--weights", metavar="PATH|none", required=True, help="backbone weights, or none (random)")
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="seed of random weights with --weights none (default 0)"
    )
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="MODEL",
        help=f"{', '.join(ARCHITECTURES)} (default {DEFAULT_MODEL}, the paper's), or a .json of Dinov2Config fields",
    )
    taxonomy = p.add_mutually_exclusive_group()
    taxonomy.add_argument(
        "--checklist", metavar="CSV", type=Path, help="a bird checklist CSV to build CUB's taxonomy from"
    )
    taxonomy.add_argument("--cub-taxonomy", metavar="CSV", type=Path, help="a ready CUB taxonomy CSV")
    p.add_argument("--aliases", metavar="JSON", type=Path, help="with --checklist: CUB class name aliases")
    p.add_argument(
        "--scale",
        choices=SCALES,
        default=PAPER,
        help="paper: the protocol unchanged (default); smoke: every stage and table with budgets cut to minutes",
    )
    p.add_argument("--out", metavar="DIR", type=Path, help="where the tables go (default: inside the home)")
    p.add_argument(
        "--redo",
        metavar="STAGE",
        action="append",
        default=[],
        help="run this stage again, and every stage after it (repeatable); complete studies and features "
        "of unchanged inputs are found and kept",
    )
    p.add_argument("--executor", choices=("local", "ray"), help="where the studies' jobs run (as for `run`)")
    p.add_argument("--ray-address", metavar="ADDRESS", help="with --executor ray: the cluster (as for `run`)")
    p.add_argument(
        "--stages-at-once",
        metavar="N",
        type=positive_int,
        default=DEFAULT_STAGES_AT_ONCE,
        help="stages that may run at the same time (default %(default)s); those that write the store "
        "always run one after another, so this lets an extraction run beside them",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and the time left; creates no dataset or study (stores this machine's calibration)",
    )
    p.set_defaults(func=cmd_replicate)


def replication_id(args: argparse.Namespace) -> str:
    model = args.model if args.model in ARCHITECTURES else Path(args.model).stem
    return replication_name(model, args.scale, args.seed)


def _roots(args: argparse.Namespace) -> dict[str, Path]:
    return {d: Path(root) for d, root in ((CUB, args.cub), (NABIRDS, args.nabirds)) if root is not None}


def _plan_estimate(
    args: argparse.Namespace, stages: list, external: Mapping[str, str], rid: str, home: Path
) -> tuple[dict[str, StageWork], Calibrated]:
    """Count each stage's work from its plan, and price it with this machine's calibration: the stored
    one for this machine, model and shapes, else measured now in a child process (a few seconds) and
    stored. Both are recorded in the store (no dataset or study is created)."""
    from hierconsole.study.db.calibrations import put_replication_work
    from hierconsole.study.db.storage import Store

    roots = _roots(args)
    sizes = {d: dataset_size(root) for d, root in roots.items()}
    work = stage_work(stages, args.scale, sizes, builds_taxonomy=args.checklist is not None)
    run = calibration_run(sizes)
    shape = calibration_shape(run, args.scale, sizes[run.dataset])
    model = args.model if args.model in ARCHITECTURES else external["model"]
    images = sample_images(roots[run.dataset], CALIBRATION_IMAGES + 1)
    overrides = assignment_list(run_overrides(run, args.scale))

    def measured() -> UnitCosts:
        return measure(run.preset, overrides, args.model, shape["gallery"], images)

    calibrated = ensure_calibration(lambda: Store(home), described(model, shape), measured)
    with Store(home) as store:
        put_replication_work(store, rid, calibrated.key, {name: w.to_json() for name, w in work.items()})
    return work, calibrated


def _estimate(planned: list[Planned], records: Mapping, work: Mapping[str, StageWork], units: UnitCosts) -> Estimate:
    left = [p.stage.name for p in planned if p.decision in (Decision.RUN, Decision.WAITING)]
    measured = {name: r.seconds for name, r in records.items() if r.seconds is not None}
    return estimate(left, work, units, measured)


def _jobs(stage: str, work: StageWork) -> str:
    if stage in LIGHT_STAGES:
        return "in this process"
    jobs = sum(p.jobs for p in work.phases)
    commands = work.commands + work.torch_commands
    parts = [counted(jobs, "job")] if jobs else []
    if work.images:
        parts.append(counted(work.images, "image"))
    if commands:
        parts.append(counted(commands, "command"))
    return ", ".join(parts) or "in process"


def _print_plan(
    out: Console,
    rid: str,
    planned: list[Planned],
    records: Mapping,
    datasets: frozenset[str],
    carried: Mapping[str, Mapping[str, str]],
    work: Mapping[str, StageWork],
    calibrated: Calibrated,
    home: Path,
) -> None:
    out.print(f"replication {escape(rid)}", highlight=False)
    est = _estimate(planned, records, work, calibrated.units)
    by_stage = {s.stage: s for s in est.stages}
    for p in planned:
        record = records.get(p.stage.name)
        took = f"last {record.seconds:.1f}s" if record and record.seconds is not None else ""
        left = by_stage.get(p.stage.name)
        guess = f"~{left.seconds:.0f}s {left.describe()}" if left else "-"
        out.print(
            f"  {p.stage.name:<18} {p.decision.value:<8} {_jobs(p.stage.name, work[p.stage.name]):<32} {guess:<34} {took}",
            highlight=False,
        )
    kept = sorted(datasets_of_stages(carried))
    if kept:
        out.print(
            f"carried: the finished studies of {', '.join(kept)} in this replication fill its tables "
            "(its folder was not given, so its stages are not checked again)",
            highlight=False,
        )
    omitted = sorted(set(DATASETS) - datasets - set(kept))
    if omitted:
        out.print(f"omitted: the tables of {', '.join(omitted)} (no folder given)", highlight=False)
    stale = [p.stage.name for p in planned if p.decision == Decision.STALE]
    if stale:
        out.print(
            f"changed inputs: {', '.join(stale)} finished under other inputs; kept until --redo names them",
            highlight=False,
        )
    out.print(f"time left on this machine: about {est.total:.0f}s", highlight=False)
    when = "measured now" if calibrated.measured_now else f"measured {calibrated.measured_at:%Y-%m-%d %H:%M}"
    u = calibrated.units
    out.print(
        f"calibration ({when}, {u.cores} cores): child start-up {u.command_start:.2f}s, worker start-up "
        f"{u.worker_start:.2f}s, {u.cell_update * 1e3:.2f} ms per cell-update, {u.comparison * 1e9:.1f} ns per "
        f"query x gallery pair, {u.image * 1e3:.0f} ms per image",
        highlight=False,
    )
    out.print(
        f"stored in {escape(str(home))}: this machine's calibration and the plan's counted work "
        "(no dataset or study was created)",
        highlight=False,
    )


def cmd_replicate(args: argparse.Namespace) -> int:
    external = replication_inputs(args)
    datasets = given_datasets(args)
    names = {s.name for s in paper_stages(datasets)}
    unknown = sorted(set(args.redo) - names)
    if unknown:
        raise HierconsoleError(f"--redo {', '.join(unknown)}: not a stage of this replication ({', '.join(sorted(names))})")
    rid = replication_id(args)
    out = Console(soft_wrap=True)
    if args.dry_run:
        if db_path(resolve_home(args.home, create=False)).exists():
            with open_for_reading(args.home) as store:
                records = load_records(store, rid)
        else:  # a replication may start from no home at all: it will make one, and nothing is done yet
            records = {}
    else:
        from hierconsole.study.db.storage import Store

        # Made (or migrated) before the first record, so every read below finds a store.
        with Store(resolve_home(args.home)) as store:
            records = load_records(store, rid)
    carried = carried_outputs(records, datasets)
    if carried:
        external[CARRIED_INPUT] = text_sha256(json.dumps(carried, sort_keys=True))
    stages = paper_stages(datasets, carried=bool(carried))
    home = resolve_home(args.home)
    tables_out = (args.out or home / "replications" / rid / "tables").resolve()
    gone = outputs_gone(records, tables_out)
    for stage, file in gone.items():
        then = "to be rebuilt" if args.dry_run else "rebuilt"
        out.print(f"{stage}: {escape(file)} is not in {escape(str(tables_out))} as it was written: {then}", highlight=False)
    redo = [*args.redo, *gone]
    if args.dry_run:
        work, calibrated = _plan_estimate(args, stages, external, rid, home)
        planned = plan(stages, external, records, dependents(stages, redo))
        _print_plan(out, rid, planned, records, datasets, carried, work, calibrated, home)
        return 0
    return _run(args, stages, external, rid, out, redo, carried, tables_out)


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


def _absent_reasons(given: frozenset[str], carried: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Why each study stage of a dataset neither given nor carried is absent (named in index.md)."""
    return {
        stage: f"no --{dataset} folder given"
        for dataset in DATASETS
        if dataset not in given
        for stage in STUDY_STAGES[dataset]
        if stage not in carried
    }


def _run(
    args: argparse.Namespace,
    stages: list,
    external: dict[str, str],
    rid: str,
    out: Console,
    redo: list[str],
    carried: Mapping[str, Mapping[str, str]],
    tables_out: Path,
) -> int:
    from hierconsole.cli.progress import print_backup_note
    from hierconsole.cli.replicate_progress import StageProgress
    from hierconsole.cli.replicate_stages import Replication
    from hierconsole.present.report.replication_tables import write_tables
    from hierconsole.study.db.storage import Store
    from hierconsole.study.read.paper_tables import replication_tables
    from hierconsole.study.run.replication import run_replication

    home = resolve_home(args.home)
    _plan_estimate(args, stages, external, rid, home)  # what the console's estimate reads
    folder = home / "replications" / rid
    rep = Replication(args, home, rid, folder, external)
    given = datasets_of(stages)
    absent = _absent_reasons(given, carried)

    def tables(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        comparable = args.scale != SMOKE
        with Store(home, read_only=True) as store:
            measured, omitted = replication_tables(store, {**carried, **upstream}, comparable=comparable, absent=absent)
        rows = [(t.table_id, t.title, t.frame) for t in measured]
        written = write_tables(rows, omitted, tables_out, comparable=comparable)
        return {name: file_sha256(path) for name, path in sorted(written.items())}

    def report(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        from hierconsole.cli.report import write_report

        made: dict[str, str] = {}
        for leftover in tables_out.glob(".report-*.tmp"):  # a report killed mid-write
            leftover.unlink()
        kept = given | datasets_of_stages(carried)
        for dataset in set(DATASETS) - kept:  # left out of this replication now: its report would be stale
            (tables_out / f"report-{dataset}.html").unlink(missing_ok=True)
        for stage, dataset in factorial_stages(datasets_of(stages)).items():
            (study_id,) = upstream[stage].values()
            path = write_report(study_id, tables_out / f"report-{dataset}.html", home=str(home), force=True)
            made[path.name] = file_sha256(path)
        return made

    actions = rep.actions([s.name for s in stages], tables, report)
    progress = StageProgress(out, [s.name for s in stages], rep)
    rep.on_warning = progress.warn
    started = time.monotonic()
    with progress:
        outcome = run_replication(
            lambda: Store(home),
            rid,
            stages,
            external,
            actions,
            redo=redo,
            on_stage=progress.stage,
            at_once=args.stages_at_once,
            on_failure=rep.stop,
            timed=rep.timed,
        )
    ran = counted(len(outcome.ran), "stage")
    out.print(f"replication {escape(rid)}: {ran} ran in {time.monotonic() - started:.0f}s", highlight=False)
    if outcome.stale:
        out.print(
            f"changed inputs: {', '.join(outcome.stale)} (and what follows them) kept; "
            f"run again with --redo {outcome.stale[0]} to rebuild",
            highlight=False,
        )
    out.print(f"tables: {escape(str(tables_out))} (index.md lists them)", highlight=False)
    print_backup_note(home, out)  # the stages' own commands ran the store: said here, at the very end
    return 0


def datasets_of(stages: list) -> frozenset[str]:
    return datasets_of_stages(s.name for s in stages if s.name.startswith("import-"))


def datasets_of_stages(names: Iterable[str]) -> frozenset[str]:
    """The datasets these stage names (`<step>-<dataset>`) belong to."""
    return frozenset(name.partition("-")[2] for name in names)

