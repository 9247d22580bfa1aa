"""`hierconsole replicate`: the paper from the dataset folders to every table beside the paper's values.

The replication is a stage graph (`study.run.paper_stages`) recorded in the store; each stage is keyed by
its inputs' content hashes, so a re-run continues where the last one stopped, a finished stage is never
redone, and a changed input is named (its stage and dependents re-run with `--redo STAGE`). `--dry-run`
prints the plan and the time left from the stages' recorded wall times, and creates nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.markup import escape

from hierconsole.cli.arguments import positive_int
from hierconsole.cli.reading import open_for_reading
from hierconsole.config.family import load_family, resolve_family
from hierconsole.config.files import resolve_preset
from hierconsole.datasets.checklist import read_aliases, read_checklist
from hierconsole.datasets.cub import cub_taxonomy, read_image_dir
from hierconsole.datasets.nabirds import read_nabirds_dir
from hierconsole.errors import HierconsoleError, InputError
from hierconsole.extraction.architectures import ARCHITECTURES, DEFAULT_MODEL, architecture
from hierconsole.extraction.weights import RANDOM, check_seed, weights_kind
from hierconsole.locations import db_path, resolve_home
from hierconsole.plurals import counted
from hierconsole.study.analysis.paper_tables import PAPER_TABLES_DIGEST
from hierconsole.study.analysis.stage_costs import Estimate, StageWork, UnitCosts, estimate
from hierconsole.study.executors import checked_executor
from hierconsole.study.run.calibration import (
    CALIBRATION_IMAGES,
    Calibrated,
    described,
    ensure_calibration,
    measure,
)
from hierconsole.study.run.input_hashes import file_sha256, folder_sha256, text_sha256
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
    StudyRun,
    assignment_list,
    factorial_stages,
    paper_stages,
    replication_name,
    run_overrides,
    run_plans,
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

_T = TypeVar("_T")
_R = TypeVar("_R")


DEFAULT_SEED = 0
"""The random weights' seed unless told (only --weights none takes one)."""


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


def _datasets(args: argparse.Namespace) -> frozenset[str]:
    return frozenset(d for d, given in ((CUB, args.cub), (NABIRDS, args.nabirds)) if given is not None)


def _external(args: argparse.Namespace) -> dict[str, str]:
    """Validate every input and hash it; nothing is created before this succeeds.

    Each input is read here by the reader of the stage that uses it (the extractor's model and weights
    rules, `import`'s dataset readers, `taxonomy build-cub`'s checklist and aliases readers), so an input a
    stage would refuse hours in is refused now, in one line."""
    if args.cub is None and args.nabirds is None:
        raise HierconsoleError(
            "replicate: give --cub DIR, --nabirds DIR or both (the datasets to replicate on)"
        )
    checked_executor(args.executor, args.ray_address)  # as `run` checks it, before the studies start
    _checked(check_seed, args.seed, option="--seed")
    if args.seed != DEFAULT_SEED and args.weights != RANDOM:
        # The seed names the replication: with real weights it would start a second one that retrains
        # everything to the same numbers.
        raise HierconsoleError(
            f"--seed {args.seed}: a seed only applies to --weights none (random weights); drop --seed, since "
            f"real weights are the same whatever the seed"
        )
    _check_out(args.out)
    external = {"scale": args.scale, "seed": str(args.seed), "paper_values": PAPER_TABLES_DIGEST}
    if args.model in ARCHITECTURES:
        external["model"] = args.model
    else:
        # The extractor's own loader: a malformed or non-DINOv2 config is refused here, not in a child.
        _checked(architecture, args.model, option="--model")
        model = Path(args.model)
        external["model"] = file_sha256(model)
        args.model = str(model.resolve())
    for option, folder in (("--cub", args.cub), ("--nabirds", args.nabirds)):
        if folder is not None and (not (folder / "images").is_dir() or not (folder / "images.txt").is_file()):
            raise HierconsoleError(
                f"{option} {folder}: no images/ folder and images.txt in it; pass the dataset's root folder"
            )
    if args.cub is not None:
        source = args.checklist or args.cub_taxonomy
        if source is None:
            raise HierconsoleError(
                "replicate --cub needs CUB's taxonomy: --checklist CSV (a bird checklist to build it from) "
                "or --cub-taxonomy CSV (a ready Class,Genus,Family file)"
            )
        option = "--checklist" if args.checklist else "--cub-taxonomy"
        _check_file(option, source)
        if args.aliases is not None:
            if args.checklist is None:
                raise HierconsoleError("--aliases goes with --checklist (it names checklist entries)")
            _check_file("--aliases", args.aliases)
    elif args.checklist or args.cub_taxonomy or args.aliases:
        raise HierconsoleError("--checklist, --cub-taxonomy and --aliases are CUB's: give --cub DIR with them")
    if args.nabirds is not None and not (args.nabirds / "hierarchy.txt").is_file():
        raise HierconsoleError(f"--nabirds {args.nabirds}: no hierarchy.txt in it; pass the nabirds/ folder")
    if args.weights == RANDOM:
        external["weights"] = RANDOM
    elif not Path(args.weights).exists():
        raise HierconsoleError(f"--weights {args.weights}: no such file or folder; pass the weights, or none")
    else:
        _checked(weights_kind, Path(args.weights), option="--weights")  # the extractor's rule
    _check_datasets(args)
    # Every input is valid: hash them (the stages' keys).
    for key, folder in (("cub_images", args.cub), ("nabirds_images", args.nabirds)):
        if folder is not None:
            external[key] = folder_sha256(folder / "images")
    if args.cub is not None:
        labels = [args.cub / n for n in ("classes.txt", "image_class_labels.txt") if (args.cub / n).is_file()]
        aliases = file_sha256(args.aliases) if args.aliases is not None else ""
        external["cub_labels"] = text_sha256("".join(file_sha256(f) for f in labels))
        external["taxonomy_source"] = text_sha256(f"{option}:{file_sha256(source)}:{aliases}")
    if args.nabirds is not None:
        external["nabirds_hierarchy"] = file_sha256(args.nabirds / "hierarchy.txt")
    external.update(run_plans(args.scale, _preset_sha256))
    if args.weights != RANDOM:
        weights = Path(args.weights)
        external["weights"] = file_sha256(weights) if weights.is_file() else folder_sha256(weights)
    return external


def _checked(check: Callable[[_T], _R], value: _T, *, option: str) -> _R:
    """One of the stages' own checks (or readers) of an option's value; its refusal becomes one line naming
    the option."""
    try:
        return check(value)
    except InputError as exc:
        raise HierconsoleError(exc.one_line(option)) from None


def _check_file(option: str, path: Path) -> None:
    if path.is_dir():
        raise HierconsoleError(f"{option} {path}: is a folder, not a file; give the file itself")
    if not path.is_file():
        raise HierconsoleError(f"{option} {path}: no such file")


def _check_out(out: Path | None) -> None:
    """--out must be a folder, or a path one can be made at: the tables are written at the very end."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise HierconsoleError(f"--out {out}: is a file, not a folder; give a folder for the tables (made if absent)")
    for above in out.absolute().parents:
        if above.exists():
            if not above.is_dir():
                raise HierconsoleError(
                    f"--out {out}: {above} is a file, so no folder can be made under it; give a folder for the tables"
                )
            if not os.access(above, os.W_OK | os.X_OK) and not out.exists():
                raise HierconsoleError(
                    f"--out {out}: the folder {above} is not writable, so the tables cannot be written there; "
                    "give a folder you can write to"
                )
            break


def _check_datasets(args: argparse.Namespace) -> None:
    """Read each dataset folder's lists as `import` will (and CUB's taxonomy, checklist and aliases as
    `import cub` and `taxonomy build-cub` will): a stage never meets an input this lets through."""
    if args.cub is not None:
        if (args.cub / "hierarchy.txt").is_file():  # NABirds' layout: CUB's stages would read it wrong
            raise HierconsoleError(
                f"--cub {args.cub}: it holds hierarchy.txt, so it is a NABirds folder; pass it as --nabirds"
            )
        table = _checked(read_image_dir, args.cub, option="--cub")
        if args.cub_taxonomy is not None:
            _checked(lambda path: cub_taxonomy(table, path), args.cub_taxonomy, option="--cub-taxonomy")
        if args.checklist is not None:
            _checked(read_checklist, args.checklist, option="--checklist")
        if args.aliases is not None:
            _checked(read_aliases, args.aliases, option="--aliases")
    if args.nabirds is not None:
        _checked(read_nabirds_dir, args.nabirds, option="--nabirds")


def _preset_sha256(run: StudyRun) -> str:
    """The bytes a study run reads: its preset file, or its family file and that family's base preset."""
    if not run.family:
        return file_sha256(resolve_preset(run.preset))
    family = resolve_family(run.preset)
    return text_sha256(file_sha256(family) + file_sha256(resolve_preset(load_family(family).base)))


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
    external = _external(args)
    datasets = _datasets(args)
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
    from hierconsole.cli.replicate_progress import StageProgress
    from hierconsole.cli.replicate_stages import Replication
    from hierconsole.study.db.storage import Store
    from hierconsole.study.read.paper_tables import replication_tables
    from hierconsole.study.report.replication_tables import write_tables
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
    return 0


def datasets_of(stages: list) -> frozenset[str]:
    return datasets_of_stages(s.name for s in stages if s.name.startswith("import-"))


def datasets_of_stages(names: Iterable[str]) -> frozenset[str]:
    """The datasets these stage names (`<step>-<dataset>`) belong to."""
    return frozenset(name.partition("-")[2] for name in names)

