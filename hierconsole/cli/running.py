"""`hierconsole run|demo|resume|cancel|rescore|delete`: running studies headless (`inspecting` shows them)."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from hierconsole.cli.output import confirmed, output_console, print_grid
from hierconsole.cli.progress import drive, problem_printer, saying_backups
from hierconsole.cli.reading import print_empty_levels
from hierconsole.config import Preset, load_preset
from hierconsole.config.family import Family
from hierconsole.config.options import MAX_INTEGER
from hierconsole.config.overrides import AssignmentError, parse_assignment
from hierconsole.errors import HierconsoleError
from hierconsole.locations import db_path, resolve_home
from hierconsole.names import check_name
from hierconsole.plurals import counted
from hierconsole.present.tables.split_plan import split_plan_grid
from hierconsole.present.tables.studies import audits_grid
from hierconsole.study import read
from hierconsole.study.db.catalog import ensure_dataset, registered_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.executors import (
    LOCAL_RAY,
    RAY_CONNECT_TIMEOUT,
    JobExecutor,
    checked_executor,
    ray_address,
)
from hierconsole.study.executors.devices import check_devices
from hierconsole.study.run.drawn_splits import DrawnSplits, plan_rows
from hierconsole.study.run.lifecycle import advance, create_study, delete_study, study_splits
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.study.run.rescoring import queue_rescore, reconcile
from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS
from hierconsole.vocabulary import (
    AGGREGATIONS,
    ARM_LEGEND,
    DEVICES,
    EXECUTORS,
    HIER_METRIC,
    LEVELS,
    MAP,
    Executor,
    JobState,
    Phase,
)


def _assignment(value: str) -> tuple[str, object]:
    """`--set key=value`, read as `config.overrides.parse_assignment` reads it (the console's too)."""
    try:
        return parse_assignment(value)
    except AssignmentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gpus(value: str) -> list[str]:
    ids = [g.strip() for g in value.split(",") if g.strip()]
    if not ids:
        raise argparse.ArgumentTypeError("give GPU ids separated by commas, e.g. 0,1")
    # A GPU id is CUDA's index, 0 or more: anything else would only fail once a worker asked for it.
    bad = next((g for g in ids if not (g.isascii() and g.isdigit())), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(
            f"{value!r}: GPU id {bad!r} is not a GPU index; give indices 0 or more separated by commas, e.g. 0,1"
        )
    return ids


def _seeds(value: str) -> list[int]:
    try:
        return [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be comma-separated integers, got {value!r}") from None


def add_executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        help="where jobs run: local worker processes, or tasks on a Ray cluster (default: $HIERCONSOLE_EXECUTOR, "
        "else local)",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --executor ray: auto, ray://HOST:PORT or HOST:PORT of an existing cluster (default: "
        "$HIERCONSOLE_RAY_ADDRESS, else a Ray instance started for this command)",
    )
    p.add_argument(
        "--ray-connect-timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        default=RAY_CONNECT_TIMEOUT,
        help=f"with --executor ray: give up on an address that does not answer after this long (default {RAY_CONNECT_TIMEOUT:g})",
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 seconds")
    return value


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epochs", type=int, help="override training.epochs")
    p.add_argument("--seeds", type=_seeds, help="override training.seeds, e.g. 42,2024")
    p.add_argument("--device", choices=DEVICES, help="override compute.device")
    p.add_argument("--parallel", type=int, metavar="N", help="worker processes at once (default: preset)")
    p.add_argument("--gpus", type=_gpus, metavar="IDS", help="one worker per listed GPU, e.g. 0,1")
    p.add_argument(
        "--set",
        dest="overrides",
        type=_assignment,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any preset option, e.g. --set training.lr=1e-4 (repeatable)",
    )
    add_executor_options(p)


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "run", help="run a study preset (the factorial for each seed, then test and audits) or a family"
    )
    r.add_argument(
        "preset", help="a shipped preset or family name (demo, cub, nabirds-curvature-control, ...) or a TOML file"
    )
    r.add_argument("--dataset", help="dataset id in the store (overrides data.dataset)")
    r.add_argument("--name", help="the study's name (study.name) or the family's name, shown in every table")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="check the preset's counts against the dataset and print the split plan; create nothing",
    )
    add_run_options(r)
    r.set_defaults(func=cmd_run)

    d = sub.add_parser(
        "demo", help="import the synthetic demo data if absent, run demo.toml, show the results"
    )
    add_run_options(d)
    d.set_defaults(func=cmd_demo)

    u = sub.add_parser("resume", help="resume crashed, cancelled or failed jobs from their last checkpoint")
    u.add_argument("study", nargs="?", help="study id or name (default: every resumable job)")
    u.add_argument(
        "--parallel", type=int, metavar="N", help="worker processes at once (default: the resumed studies' presets)"
    )
    u.add_argument("--gpus", type=_gpus, metavar="IDS", help="one worker per listed GPU, e.g. 0,1")
    add_executor_options(u)
    u.set_defaults(func=cmd_resume)

    x = sub.add_parser("delete", help="delete a study (its rows and artifacts); refused while jobs run")
    x.add_argument("study")
    x.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    x.set_defaults(func=cmd_delete)

    c = sub.add_parser("cancel", help="cancel the queued or orphaned running jobs of a study")
    c.add_argument("study")
    c.set_defaults(func=cmd_cancel)

    q = sub.add_parser("rescore", help="re-score a locked study's test embeddings under another aggregation")
    q.add_argument("study")
    q.add_argument("--aggregate", choices=AGGREGATIONS, required=True)
    q.set_defaults(func=cmd_rescore)


def _check_parallel(parallel: int | None) -> None:
    if parallel is not None and parallel < 1:
        raise HierconsoleError(f"--parallel {parallel}: give at least 1 worker process at once")
    if parallel is not None and parallel > MAX_INTEGER:
        raise HierconsoleError(f"--parallel {parallel}: out of range; give at most {MAX_INTEGER:,} worker processes")


def _parallel(args: argparse.Namespace, preset: Preset) -> int:
    _check_parallel(args.parallel)
    if args.parallel is not None:
        return args.parallel
    return preset.compute.max_parallel_jobs


def open_executor(
    args: argparse.Namespace, store: Store, *, parallel: int, threads: int, devices: list[tuple[str, str]]
) -> JobExecutor | None:
    """The executor `--executor` (or $HIERCONSOLE_EXECUTOR) asks for, checked against the devices the
    studies want (`devices`: (compute.device, where it came from)); None: the local one, whose devices are
    probed here. A Ray cluster is connected to now, before anything is created."""
    name = checked_executor(getattr(args, "executor", None), getattr(args, "ray_address", None))
    gpus = getattr(args, "gpus", None)
    if name == Executor.LOCAL:
        for device, source in devices:
            check_devices(device, gpus, source=source)
        return None
    address = ray_address(getattr(args, "ray_address", None))
    if gpus:
        raise HierconsoleError(
            f"--gpus {','.join(gpus)} picks GPUs of this machine for local workers; with --executor ray, Ray "
            f"gives each cuda job one GPU of its node (use --device cuda, no --gpus)"
        )
    from hierconsole.study.executors.ray_cluster import RayExecutor  # imports ray: only when asked for

    explicit = getattr(args, "parallel", None)
    # A local instance runs as many jobs at once as the local executor would; a cluster as many as it
    # has CPUs for, unless --parallel says otherwise.
    local = address == LOCAL_RAY
    executor = RayExecutor(
        store.home,
        address,
        num_cpus=max(os.cpu_count() or 1, parallel * threads) if local else None,
        parallel=explicit if explicit is not None else (parallel if local else None),
        connect_timeout=getattr(args, "ray_connect_timeout", RAY_CONNECT_TIMEOUT),
    )
    try:
        for device, source in devices:
            executor.check_device(device, source)
    except BaseException:
        executor.close()
        raise
    return executor


def start_study(
    store: Store, args: argparse.Namespace, preset_ref: str, dataset: str | None, console: Console | None = None
) -> tuple[str, Preset, JobExecutor | None]:
    """Validate everything (preset, overrides, --parallel, the executor, the devices asked for, the counts
    against the dataset), then create the study; its split plan goes to `console` when given."""
    preset = load_preset(preset_ref)
    preset = preset.with_overrides(
        epochs=args.epochs, seeds=args.seeds, device=args.device, values=dict(args.overrides)
    )
    parallel = _parallel(args, preset)
    source = "--device" if args.device else f"compute.device (preset {preset.source})"
    executor = open_executor(
        args, store, parallel=parallel, threads=preset.compute.threads_per_worker,
        devices=[(preset.compute.device, source)],
    )  # fmt: skip
    try:
        dataset_id = ensure_dataset(store, dataset or preset.data.dataset)
        drawn = study_splits(store, preset, dataset_id)
        study_id = create_study(store, preset, dataset_id, drawn=drawn)
    except BaseException:
        if executor is not None:
            executor.close()
        raise
    if console is not None:
        print_plans(console, [("", preset, drawn)])
    return study_id, preset, executor


def print_plans(console: Console, members: Sequence[tuple[str, Preset, DrawnSplits]], suffix: str = "") -> None:
    """One split plan per distinct set of splits: members sharing theirs (a control's arms) share a table."""
    shared: dict[tuple[str, ...], list[int]] = {}
    for i, (_, _, splits) in enumerate(members):
        key = (splits.protocol.sha256(), splits.tuning.sha256(), *(q.sha256() for q in splits.qgs.values()))
        shared.setdefault(key, []).append(i)
    for indices in shared.values():
        names = ", ".join(members[i][0] for i in indices)
        _, preset, splits = members[indices[0]]
        title = f"split plan: {names}{suffix}" if names else f"split plan{suffix}"
        print_grid(console, split_plan_grid(*plan_rows(splits, preset), title=title))


def dry_run(args: argparse.Namespace) -> int:
    """`run --dry-run`: the preset (or each member) validated, its counts checked against the dataset and
    its split plan printed; no study, job or folder is created."""
    from hierconsole.config.family import is_family_file, load_family

    _check_parallel(args.parallel)  # a dry run refuses what the run would
    console = output_console()
    overrides = _cli_overrides(args)
    if is_family_file(args.preset):
        family = load_family(args.preset).with_overrides(overrides)
        members = [(m.name, m.preset) for m in family.members]
    else:
        preset = load_preset(args.preset).with_overrides(values=overrides)
        members = [("", preset)]
    with Store(args.home, read_only=True) as store:
        drawn = []
        for name, preset in members:
            dataset_id = registered_dataset(store, args.dataset or preset.data.dataset)
            drawn.append((name, preset, study_splits(store, preset, dataset_id)))
    print_plans(console, drawn, f" (dataset {dataset_id})")
    for name, preset, _ in drawn:
        console.print(
            f"{name or preset.name}: would train {counted(len(preset.training.seeds), 'seed job')} of "
            f"{', '.join(preset.cells)} for {counted(preset.training.epochs, 'epoch')}",
            highlight=False,
        )
    console.print("nothing was created (dry run)", highlight=False)
    return 0


def summarize(store: Store, study_id: str, console: Console) -> int:
    study = read.get_study(store, study_id)
    console.print(f"study [bold]{study_id}[/] phase: [bold]{study.phase}[/]")
    print_empty_levels(store, study_id, console)
    for job in read.job_rows(store, study_id):
        if job.state != JobState.FINISHED:
            error = f"\n{job.error.strip()[-800:]}" if job.error else ""
            console.print(f"  [red]{job.job_id}: {job.state}[/]{error}", highlight=False)
    if study.phase != Phase.COMPLETE:
        return 1
    from hierconsole.cli.analysis import print_effects
    from hierconsole.present.tables.studies import selection_grid

    if study.preset.training.select_epoch:
        print_grid(console, selection_grid(read.selected_epochs(store, study_id), study.preset.training.selection_score))
    empty = read.empty_levels(store, study_id)
    metrics = [*(f"{level}_{MAP}" for level in LEVELS if level not in empty), HIER_METRIC]
    view = read.study_effects(store, study_id, metrics, effect_metrics=[HIER_METRIC])
    print_effects(console, view, ARM_DIGITS, EFFECT_DIGITS)
    checks = read.stored_audits(store, study_id)
    print_grid(console, audits_grid(checks))
    return 0 if all(c.ok for c in checks) else 1


def next_steps(store: Store, study_id: str, home_given: bool, console: Console) -> None:
    """Where the results are and what to run next, with this store's --home where one was given."""
    home = f" --home {shlex.quote(str(store.home))}" if home_given else ""
    console.print(
        f"\nstored in [bold]{escape(str(store.path))}[/] (study [bold]{escape(study_id)}[/])", soft_wrap=True
    )
    console.print("next:")
    for command, what in (
        ("", "open the console on this store"),
        (f" effects {study_id}", "every metric's arm table and simple effects"),
        (f" audit {study_id}", "the fairness and leakage checks with their evidence"),
        (f" export effects --study {study_id} -o effects.csv", "write a table (csv, parquet, json, md, latex)"),
    ):
        # Never broken by Rich: a command must copy and paste whole, however the terminal wraps it.
        console.print(f"  [bold]{escape(f'hierconsole{home}{command}')}[/]", highlight=False, soft_wrap=True)
        console.print(f"      {what}", style="dim", highlight=False)


# -- commands ---------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from hierconsole.config.family import is_family_file

    if args.name is not None:  # a study's or a family's name: checked before anything, dry run or not
        check_name(args.name, "--name")
    if getattr(args, "dry_run", False):
        return dry_run(args)
    if is_family_file(args.preset):
        from dataclasses import replace

        from hierconsole.config.family import load_family

        family = load_family(args.preset)
        return run_family(args, replace(family, name=args.name) if args.name else family)
    if args.name is not None:
        args.overrides.append(("study.name", args.name))
    console = output_console()
    with saying_backups(args.home, console), Store(args.home) as store:
        study_id, preset, executor = start_study(store, args, args.preset, args.dataset, console)
        console.print(
            f"study [bold]{study_id}[/]: {preset.name} on {read.get_study(store, study_id).dataset_id}, "
            f"seeds {list(preset.training.seeds)}, {counted(preset.training.epochs, 'epoch')}{_on(executor)}"
        )
        console.print(ARM_LEGEND, style="dim", highlight=False)
        print_empty_levels(store, study_id, console)
        expected = read.expected_counts(store, study_id)
        if expected.ok is False:
            # Said before any training: a split that differs from the declared protocol is not the study asked for.
            console.print(f"[yellow]warning:[/] {expected.name}: {escape(expected.evidence)}", highlight=False)
        # Only this study's jobs: leftovers of earlier studies are shown by `runs` and run by `resume`.
        orch = Orchestrator(
            store, max_parallel=_parallel(args, preset), gpus=args.gpus, studies=[study_id], executor=executor
        )
        try:
            interrupted = drive(store, [study_id], parallel=None, console=console, orchestrator=orch)
        finally:
            orch.close_executors()
        code = summarize(store, study_id, console)
        if interrupted is not None:
            return interrupted
        next_steps(store, study_id, args.home is not None, console)
        return code


def _on(executor: JobExecutor | None) -> str:
    """`, on Ray (...)` for a study whose jobs run on Ray."""
    describe = getattr(executor, "describe", None)
    return f", on {describe()}" if describe is not None else ""


def cmd_demo(args: argparse.Namespace) -> int:
    args.dataset = None
    args.name = None
    args.preset = "demo"
    return cmd_run(args)


def cmd_resume(args: argparse.Namespace) -> int:
    """Crashed, cancelled and failed jobs go back in the queue; queued and orphaned running ones are
    driven too, so a console that quit and left work behind can be replaced by a headless resume."""
    console = output_console()
    _check_parallel(args.parallel)
    if not db_path(resolve_home(args.home, create=False)).exists():
        # Nothing was ever run here: a mistyped home or study is answered from an empty read-only store
        # (which refuses a missing home folder), and nothing is created. An existing store is opened for
        # writing below even when nothing is to be resumed, since that is what brings an old one's schema up.
        with Store(args.home, read_only=True) as empty:
            if args.study:
                read.resolve_study(empty, args.study)
        console.print("nothing to resume")
        return 0
    with saying_backups(args.home, console), Store(args.home) as store:
        only = read.resolve_study(store, args.study) if args.study else None
        # The same studies before and after the orchestrator settles running jobs (a dead worker's job
        # turns crashed: resumable instead of active) and after the resumable ones are queued again.
        studies = sorted(_to_resume(store, only))
        parallel = args.parallel or _registered_parallel(store, studies)
        executor = open_executor(
            args, store, parallel=parallel, threads=read.job_threads(store), devices=[("cpu", "--gpus")]
        )
        # Constructing it settles jobs an earlier orchestrator left running (their events replayed).
        orch = Orchestrator(
            store,
            max_parallel=parallel,
            gpus=args.gpus,
            on_problem=problem_printer(console),
            executor=executor,
            studies=[only] if only else None,  # `resume STUDY` launches that study's jobs, no other's
        )
        try:
            orch.resume([job_id for job_id, _ in read.resumable_jobs(store, only)])
            if not studies:  # said once the options are checked (the executor opened), as every resume does
                console.print("nothing to resume")
                return 0
            for study_id in studies:
                advance(store, study_id)  # a study whose jobs all ended may have a phase to catch up on
            interrupted = drive(store, studies, parallel=parallel, console=console, orchestrator=orch)
        finally:
            orch.close_executors()
        code = max(summarize(store, s, console) for s in studies)
        return interrupted if interrupted is not None else code


def _to_resume(store: Store, only: str | None) -> set[str]:
    """The studies a resume would drive: those with a resumable or active job, or a phase to catch up on."""
    studies = {s for _, s in read.resumable_jobs(store, only)} | {s for _, s in read.active_jobs(store, only)}
    return studies | set(read.unfinished_studies(store, only))


def _registered_parallel(store: Store, studies: Sequence[str]) -> int:
    """Jobs at once for a resume not told --parallel: the most that the resumed studies' presets asked for
    (as registered), as their `run` gave them; 1 when there is none."""
    return max((read.get_study(store, s).preset.compute.max_parallel_jobs for s in studies), default=1)


def cmd_cancel(args: argparse.Namespace) -> int:
    with Store(args.home) as store:
        study_id = read.resolve_study(store, args.study)
        orch = Orchestrator(store, on_problem=problem_printer(output_console()))
        ids = [job_id for job_id, _ in read.active_jobs(store, study_id)]
        for job_id in ids:
            orch.cancel(job_id)
        orch.shutdown(cancel=True)
        orch.close_executors()
        output_console().print(f"cancelled {counted(len(ids), 'job')} of {study_id}")
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    console = output_console()
    with saying_backups(args.home, console), Store(args.home) as store:
        study_id = read.resolve_study(store, args.study)
        study = read.get_study(store, study_id)
        if study.phase != Phase.COMPLETE:
            raise HierconsoleError(
                f"study {study_id} is {study.phase}; only a complete study can be re-scored"
            )
        queue_rescore(store, study_id, args.aggregate)
        drive(store, [study_id], parallel=1, console=console)
        report = reconcile(store, study_id)
        console.print(report.message)
        return 0 if report.ok else 1


def cmd_delete(args: argparse.Namespace) -> int:
    with Store(args.home) as store:
        study_id = read.resolve_study(store, args.study)
        if not confirmed(f"delete study {study_id} with all its runs, metrics and artifacts?", yes=args.yes):
            return 1
        delete_study(store, study_id)
        output_console().print(f"deleted {study_id}")
    return 0


# -- families ---------------------------------------------------------------------------------------


def _cli_overrides(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = dict(getattr(args, "overrides", None) or [])
    if getattr(args, "epochs", None) is not None:
        values["training.epochs"] = args.epochs
    if getattr(args, "seeds", None) is not None:
        values["training.seeds"] = list(args.seeds)
    if getattr(args, "device", None) is not None:
        values["compute.device"] = args.device
    return values


def run_family(args: argparse.Namespace, family: Family) -> int:
    """Queue every member of a family, drive them to the end, then show members, declared contrasts and
    (an outer-split family with arms) the arms over splits and their gains."""
    from hierconsole.present.tables.families import (
        contrast_grid,
        families_grid,
        outer_arms_grid,
        outer_gains_grid,
    )
    from hierconsole.study.read.families import family_contrasts, family_outer_arms, get_family
    from hierconsole.study.run.families import create_family, family_splits

    family = family.with_overrides(_cli_overrides(args))
    # As for one study: --parallel and the devices every member asks for, before anything is created.
    for member in family.members:
        _parallel(args, member.preset)
    gpus = getattr(args, "gpus", None)
    source = "--device" if args.device else "compute.device (family members)"
    devices = [(device, source) for device in sorted({m.preset.compute.device for m in family.members})]
    parallel = args.parallel or family.members[0].preset.compute.max_parallel_jobs
    threads = max(m.preset.compute.threads_per_worker for m in family.members)
    console = output_console()
    with saying_backups(args.home, console), Store(args.home) as store:
        executor = open_executor(args, store, parallel=parallel, threads=threads, devices=devices)
        try:
            drawn = family_splits(store, family, getattr(args, "dataset", None))
            family_id, studies = create_family(store, family, getattr(args, "dataset", None), drawn=drawn)
        except BaseException:
            if executor is not None:
                executor.close()
            raise
        print_plans(console, [(m.name, m.preset, d) for m, d in zip(family.members, drawn, strict=True)])
        seeds = list(family.members[0].preset.training.seeds)
        console.print(
            f"family [bold]{family_id}[/]: {counted(len(studies), 'member')} ({', '.join(m.name for m in family.members)}), "
            f"seeds {seeds}{_on(executor)}"
        )
        orch = Orchestrator(store, max_parallel=parallel, gpus=gpus, studies=list(studies), executor=executor)
        try:
            interrupted = drive(store, studies, parallel=None, console=console, orchestrator=orch)
        finally:
            orch.close_executors()
        codes = [summarize(store, s, console) for s in studies]
        print_grid(console, families_grid([get_family(store, family_id)]))
        if interrupted is not None:
            return interrupted
        complete = all(read.get_study(store, s).phase == Phase.COMPLETE for s in studies)
        if complete and family.contrasts:
            _, contrasts = family_contrasts(store, family_id)
            for c in contrasts:
                print_grid(console, contrast_grid(c, EFFECT_DIGITS))
        if complete and family.outer is not None:
            _, view = family_outer_arms(store, family_id)
            print_grid(console, outer_arms_grid(view, ARM_DIGITS))
            if view.gains:
                print_grid(console, outer_gains_grid(view, EFFECT_DIGITS))
        return max(codes)
