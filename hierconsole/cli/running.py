"""`hierconsole run|demo|resume|cancel|rescore|delete`: running studies headless (`inspecting` shows them)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from hierconsole.cli.output import confirmed, output_console, print_grid
from hierconsole.cli.progress import drive, problem_printer, saying_backups
from hierconsole.cli.reading import print_empty_levels
from hierconsole.config import Preset
from hierconsole.config.family import Family
from hierconsole.locations import db_path, resolve_home
from hierconsole.plurals import counted
from hierconsole.present.tables.split_plan import split_plan_grid
from hierconsole.present.tables.studies import audits_grid
from hierconsole.study import read
from hierconsole.study.commands import (
    RAY_CONNECT_TIMEOUT,
    Launched,
    LaunchRequest,
    Workers,
    cancel,
    delete,
    launch,
    reconcile,
    rescore,
    resume,
)
from hierconsole.study.db.storage import Store
from hierconsole.styles import ARM_DIGITS, EFFECT_DIGITS
from hierconsole.vocabulary import (
    AGGREGATIONS,
    DEVICES,
    EXECUTORS,
    HIER_METRIC,
    MAP,
    JobState,
    Phase,
)

if TYPE_CHECKING:
    from hierconsole.study.executors import JobExecutor
    from hierconsole.study.run.drawn_splits import DrawnSplits


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
    # Read and checked by the front door (`LaunchRequest.parse`), as the console's and the notebook's are.
    p.add_argument("--epochs", metavar="N", help="override training.epochs")
    p.add_argument("--seeds", help="override training.seeds, e.g. 42,2024")
    p.add_argument("--device", choices=DEVICES, help="override compute.device")
    p.add_argument("--parallel", metavar="N", help="worker processes at once (default: preset)")
    p.add_argument("--gpus", metavar="IDS", help="one worker per listed GPU, e.g. 0,1")
    p.add_argument(
        "--set",
        dest="overrides",
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
    u.add_argument("--parallel", metavar="N", help="worker processes at once (default: the resumed studies' presets)")
    u.add_argument("--gpus", metavar="IDS", help="one worker per listed GPU, e.g. 0,1")
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


def launch_request(args: argparse.Namespace, preset: str | Family | None = None) -> LaunchRequest:
    """The request `run`, `demo` and `sweep` make of their options (checked by the front door)."""
    return LaunchRequest.parse(
        preset if preset is not None else args.preset,
        dataset=getattr(args, "dataset", None),
        epochs=args.epochs,
        seeds=args.seeds,
        device=args.device,
        overrides=args.overrides,
        name=getattr(args, "name", None),
        parallel=args.parallel,
        gpus=args.gpus,
        executor=args.executor,
        address=args.ray_address,
        connect_timeout=args.ray_connect_timeout,
    )


def workers(args: argparse.Namespace) -> Workers:
    """`resume`'s --parallel, --gpus and executor options, checked as a launch's are."""
    return Workers.parse(
        parallel=args.parallel,
        gpus=args.gpus,
        executor=args.executor,
        address=args.ray_address,
        connect_timeout=args.ray_connect_timeout,
    )


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
        print_grid(console, split_plan_grid(splits, preset, title=title))


def dry_run(request: LaunchRequest, home: str | None) -> int:
    """`run --dry-run`: the preset (or each member) validated, its counts checked against the dataset and
    its split plan printed; no study, job or folder is created."""
    console = output_console()
    with Store(home, read_only=True) as store:
        plan = request.resolve(store, dry_run=True)
    print_plans(console, [(m.name, m.preset, m.splits) for m in plan.members], f" (dataset {plan.members[-1].dataset_id})")
    for m in plan.members:
        console.print(
            f"{m.name or m.preset.name}: would train {counted(len(m.preset.training.seeds), 'seed job')} of "
            f"{', '.join(m.preset.cells)} for {counted(m.preset.training.epochs, 'epoch')}",
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
    levels = read.get_dataset(store, study.dataset_id).levels  # leaf first, whatever the depth
    metrics = [*(f"{level}_{MAP}" for level in levels.codes if level not in empty), HIER_METRIC]
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


def cmd_run(args: argparse.Namespace, family: Family | None = None) -> int:
    """`run` (and `demo`, and `sweep` with the family it built): every option checked before anything is
    created, the study or family launched, driven to its end and shown."""
    request = launch_request(args, family)
    if getattr(args, "dry_run", False):
        return dry_run(request, args.home)
    console = output_console()
    with saying_backups(args.home, console), Store(args.home) as store:
        launched = launch(store, request)
        if launched.family_id is not None:
            return _run_family(store, launched, console)
        (study_id,) = launched.study_ids
        preset = launched.plan.members[0].preset
        print_plans(console, [("", preset, launched.plan.members[0].splits)])
        console.print(
            f"study [bold]{study_id}[/]: {preset.name} on {read.get_study(store, study_id).dataset_id}, "
            f"seeds {list(preset.training.seeds)}, {counted(preset.training.epochs, 'epoch')}{_on(launched.executor)}"
        )
        console.print(preset.design.legend, style="dim", highlight=False)
        print_empty_levels(store, study_id, console)
        expected = read.expected_counts(store, study_id)
        if expected.ok is False:
            # Said before any training: a split that differs from the declared protocol is not the study asked for.
            console.print(f"[yellow]warning:[/] {expected.name}: {escape(expected.evidence)}", highlight=False)
        interrupted = _drive(store, launched, console)
        code = summarize(store, study_id, console)
        if interrupted is not None:
            return interrupted
        next_steps(store, study_id, args.home is not None, console)
        return code


def _drive(store: Store, launched: Launched, console: Console) -> int | None:
    """Drive the launched studies' jobs to their end; only theirs (leftovers of earlier studies are shown by
    `runs` and run by `resume`)."""
    orch = launched.orchestrator(store)
    try:
        return drive(store, launched.study_ids, parallel=None, console=console, orchestrator=orch)
    finally:
        orch.close_executors()


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
    options = workers(args)
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
        resumed = resume(store, args.study, options, on_problem=problem_printer(console))
        try:
            if not resumed.studies:  # said once the options are checked (the executor opened), as every resume does
                console.print("nothing to resume")
                return 0
            interrupted = drive(
                store, resumed.studies, parallel=resumed.parallel, console=console, orchestrator=resumed.orchestrator
            )
        finally:
            resumed.orchestrator.close_executors()
        code = max(summarize(store, s, console) for s in resumed.studies)
        return interrupted if interrupted is not None else code


def cmd_cancel(args: argparse.Namespace) -> int:
    with Store(args.home) as store:
        study_id = read.resolve_study(store, args.study)
        n = cancel(store, study_id, on_problem=problem_printer(output_console()))
        output_console().print(f"cancelled {counted(n, 'job')} of {study_id}")
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    console = output_console()
    with saying_backups(args.home, console), Store(args.home) as store:
        study_id = rescore(store, args.study, args.aggregate)
        drive(store, [study_id], parallel=1, console=console)
        report = reconcile(store, study_id)
        console.print(report.message)
        return 0 if report.ok else 1


def cmd_delete(args: argparse.Namespace) -> int:
    with Store(args.home) as store:
        study_id = read.resolve_study(store, args.study)
        if not confirmed(f"delete study {study_id} with all its runs, metrics and artifacts?", yes=args.yes):
            return 1
        delete(store, study_id)
        output_console().print(f"deleted {study_id}")
    return 0


# -- families ---------------------------------------------------------------------------------------


def _run_family(store: Store, launched: Launched, console: Console) -> int:
    """Drive every member of a launched family to the end, then show members, declared contrasts and
    (an outer-split family with arms) the arms over splits and their gains."""
    from hierconsole.present.tables.families import (
        contrast_grid,
        families_grid,
        outer_arms_grid,
        outer_gains_grid,
    )
    from hierconsole.study.read.families import family_contrasts, family_outer_arms, get_family

    family, family_id, studies = launched.plan.family, launched.family_id, launched.study_ids
    assert family is not None and family_id is not None  # a family was launched
    print_plans(console, [(m.name, m.preset, m.splits) for m in launched.plan.members])
    seeds = list(family.members[0].preset.training.seeds)
    console.print(
        f"family [bold]{family_id}[/]: {counted(len(studies), 'member')} ({', '.join(m.name for m in family.members)}), "
        f"seeds {seeds}{_on(launched.executor)}"
    )
    interrupted = _drive(store, launched, console)
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
