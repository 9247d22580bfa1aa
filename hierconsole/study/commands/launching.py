"""Launching a study or a family: the user's strings become a `LaunchRequest` (or its problems, each the one
line every front end shows), a request resolves into the `LaunchPlan` the orchestrator launches, and `launch`
creates what the plan names. The CLI, the console and the notebook all come through here, so a bad input is
refused once, with one line, whichever of them was used.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from hierconsole.config import Preset, load_preset
from hierconsole.config.family import Family, is_family_file, load_family
from hierconsole.config.level_plan import check_levels
from hierconsole.config.options import MAX_INTEGER
from hierconsole.config.overrides import AssignmentError, parse_assignment, split_assignments
from hierconsole.datasets.splits import split_level_index
from hierconsole.datasets.synthetic import BUILT_IN
from hierconsole.errors import ConfigError, HierconsoleError
from hierconsole.levels import LevelError, Levels
from hierconsole.names import check_name
from hierconsole.study.db.catalog import dataset_levels, ensure_dataset, registered_dataset
from hierconsole.study.executors import (
    LOCAL_RAY,
    RAY_CONNECT_TIMEOUT,
    RAY_INSTALL,
    JobExecutor,
    executor_name,
    ray_address,
)
from hierconsole.study.executors.devices import check_devices
from hierconsole.study.run.components import check_components
from hierconsole.study.run.drawn_splits import DrawnSplits
from hierconsole.study.run.families import create_family
from hierconsole.study.run.lifecycle import create_study, study_splits
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.vocabulary import SYNTHETIC_PREFIX, Executor

if TYPE_CHECKING:
    from hierconsole.study.db.storage import Store


@dataclass(frozen=True)
class Problem:
    """One bad input: the option (field) it belongs to, and the line the user is shown."""

    option: str
    """preset, dataset, epochs, seeds, set, executor, address, parallel, gpus or name."""
    line: str


class LaunchProblems(HierconsoleError):
    """Every problem of a launch's inputs; said on one line (a front end with fields shows each beside its own)."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(p.line for p in self.problems))


def parse_gpus(text: str) -> tuple[str, ...]:
    """`--gpus 0,1`: CUDA indices, 0 or more (anything else would only fail once a worker asked for it)."""
    ids = [g.strip() for g in text.split(",") if g.strip()]
    if not ids:
        raise HierconsoleError("--gpus: give GPU ids separated by commas, e.g. 0,1")
    bad = next((g for g in ids if not (g.isascii() and g.isdigit())), None)
    if bad is not None:
        raise HierconsoleError(
            f"--gpus {text!r}: GPU id {bad!r} is not a GPU index; give indices 0 or more separated by commas, e.g. 0,1"
        )
    return tuple(ids)


def check_parallel(parallel: int | None) -> None:
    """`--parallel N`: at least one worker, and a number the store can keep."""
    if parallel is not None and parallel < 1:
        raise HierconsoleError(f"--parallel {parallel}: give at least 1 worker process at once")
    if parallel is not None and parallel > MAX_INTEGER:
        raise HierconsoleError(f"--parallel {parallel}: out of range; give at most {MAX_INTEGER:,} worker processes")


def _whole(value: str | int | None, option: str, problems: list[Problem]) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if not value.strip():
        return None
    try:
        return int(value)
    except ValueError:
        problems.append(Problem(option, f"--{option} {value!r} is not a whole number"))
        return None


def _seeds(value: str | Sequence[int] | None, problems: list[Problem]) -> tuple[int, ...] | None:
    if value is None or not isinstance(value, str):
        return tuple(value) if value is not None else None
    if not value.strip():
        return None
    try:
        return tuple(int(s) for s in value.replace(" ", "").split(",") if s)
    except ValueError:
        problems.append(Problem("seeds", f"--seeds {value!r} is not a comma-separated list of integers"))
        return None


@dataclass(frozen=True)
class Workers:
    """Where a launch's or a resume's jobs run, and how many at once: --parallel, --gpus, --executor,
    --ray-address, --ray-connect-timeout."""

    parallel: int | None = None
    gpus: tuple[str, ...] | None = None
    executor: Executor = Executor.LOCAL
    ray_address: str = LOCAL_RAY
    """With the ray executor: the cluster (`--ray-address`); `local` starts an instance for the launch."""
    ray_connect_timeout: float = RAY_CONNECT_TIMEOUT

    @classmethod
    def parse(
        cls,
        *,
        parallel: str | int | None = None,
        gpus: str | Sequence[str] | None = None,
        executor: str | None = None,
        address: str | None = None,
        connect_timeout: float = RAY_CONNECT_TIMEOUT,
        problems: list[Problem] | None = None,
    ) -> Workers:
        """The options as given (`executor` None: $HIERCONSOLE_EXECUTOR, else local); LaunchProblems lists
        every problem (added to `problems` instead, when given). Ray is looked for, never imported: it is
        loaded only when a Ray study is launched."""
        found: list[Problem] = []
        chosen, where = Executor.LOCAL, LOCAL_RAY
        address = address.strip() if address is not None and address.strip() else None
        try:
            chosen = executor_name(executor or None)
        except HierconsoleError as exc:
            found.append(Problem("executor", str(exc)))
        if chosen == Executor.RAY:
            if importlib.util.find_spec("ray") is None:
                found.append(
                    Problem("executor", f"--executor ray needs Ray, which is not installed here; install it: {RAY_INSTALL}")
                )
            try:
                where = ray_address(address)
            except HierconsoleError as exc:
                found.append(Problem("address", str(exc)))
        elif address is not None:
            found.append(
                Problem("address", "--ray-address names the Ray cluster of --executor ray; add --executor ray")
            )
        gpu_ids: tuple[str, ...] | None = None
        if gpus is not None and (not isinstance(gpus, str) or gpus.strip()):
            try:
                gpu_ids = parse_gpus(gpus if isinstance(gpus, str) else ",".join(str(g) for g in gpus))
            except HierconsoleError as exc:
                found.append(Problem("gpus", str(exc)))
        n = _whole(parallel, "parallel", found)
        try:
            check_parallel(n)
        except HierconsoleError as exc:
            found.append(Problem("parallel", str(exc)))
        if chosen == Executor.RAY and gpu_ids:
            found.append(
                Problem(
                    "gpus",
                    f"--gpus {','.join(gpu_ids)} picks GPUs of this machine for local workers; with --executor "
                    f"ray, Ray gives each cuda job one GPU of its node (use --device cuda, no --gpus)",
                )
            )
        if problems is not None:
            problems.extend(found)
        elif found:
            raise LaunchProblems(found)
        return cls(n, gpu_ids, chosen, where, connect_timeout)

    def check_here(self, devices: Sequence[tuple[str, str]]) -> None:
        """The devices (and --gpus) local workers would use, probed on this machine; a Ray launch's are
        checked on its cluster (`open_executor`)."""
        if self.executor == Executor.LOCAL:
            for device, source in devices:
                check_devices(device, list(self.gpus) if self.gpus else None, source=source)


@dataclass(frozen=True)
class LaunchRequest:
    """What a user asked to launch, checked as far as it can be without the store."""

    preset: str | Preset | Family
    """A shipped preset or family name or a TOML file; or one built in code (a sweep's family, the demo)."""
    dataset: str | None = None
    """The dataset id in the store (else each preset's data.dataset)."""
    epochs: int | None = None
    seeds: tuple[int, ...] | None = None
    device: str | None = None
    values: tuple[tuple[str, object], ...] = ()
    """The `--set` overrides, in the order given."""
    name: str | None = None
    """The study's name (study.name) or the family's."""
    workers: Workers = Workers()

    @classmethod
    def parse(
        cls,
        preset: str | Preset | Family,
        *,
        dataset: str | None = None,
        epochs: str | int | None = None,
        seeds: str | Sequence[int] | None = None,
        device: str | None = None,
        overrides: str | Sequence[str] = (),
        values: Mapping[str, object] | None = None,
        name: str | None = None,
        parallel: str | int | None = None,
        gpus: str | Sequence[str] | None = None,
        executor: str | None = None,
        address: str | None = None,
        connect_timeout: float = RAY_CONNECT_TIMEOUT,
    ) -> LaunchRequest:
        """The request these inputs describe (`overrides`: `--set` texts, or one field of them separated by
        blanks; `values`: overrides already typed, as a notebook gives them); LaunchProblems lists every
        problem, each under its option."""
        problems: list[Problem] = []
        workers = Workers.parse(
            parallel=parallel, gpus=gpus, executor=executor, address=address, connect_timeout=connect_timeout,
            problems=problems,
        )  # fmt: skip
        typed: list[tuple[str, object]] = []
        for text in split_assignments(overrides) if isinstance(overrides, str) else overrides:
            try:
                typed.append(parse_assignment(text))
            except AssignmentError as exc:
                problems.append(Problem("set", f"--set: {exc}"))
        typed += list((values or {}).items())
        if name is not None:
            try:
                check_name(name, "--name")
            except HierconsoleError as exc:
                problems.append(Problem("name", str(exc)))
        epochs_n, seed_list = _whole(epochs, "epochs", problems), _seeds(seeds, problems)
        if problems:
            raise LaunchProblems(problems)
        return cls(preset, dataset or None, epochs_n, seed_list, device or None, tuple(typed), name, workers)

    def overrides(self) -> dict[str, Any]:
        """The dotted overrides: `--set`, then the shortcuts (--epochs, --seeds, --device), which win."""
        out: dict[str, Any] = dict(self.values)
        for key, value in (
            ("training.epochs", self.epochs),
            ("training.seeds", list(self.seeds) if self.seeds is not None else None),
            ("compute.device", self.device),
        ):
            if value is not None:
                out[key] = value
        return out

    def family(self) -> Family | None:
        """The family this request launches, with its overrides and name; None for one study."""
        if isinstance(self.preset, Preset) or (isinstance(self.preset, str) and not is_family_file(self.preset)):
            return None
        family = self.preset if isinstance(self.preset, Family) else load_family(self.preset)
        family = replace(family, name=self.name) if self.name else family
        return family.with_overrides(self.overrides())

    def members(self, family: Family | None = None) -> list[tuple[str, Preset]]:
        """(member name, preset) as they will be recorded: one, named "", for a study (ConfigError lists
        every problem of the overrides). `family`: this request's, when already loaded."""
        family = family or self.family()
        if family is not None:
            return [(m.name, m.preset) for m in family.members]
        base = self.preset if isinstance(self.preset, Preset) else load_preset(str(self.preset))
        named = {"study.name": self.name} if self.name else {}
        return [("", base.with_overrides(values={**self.overrides(), **named}))]

    def shape(self) -> LaunchPlan:
        """The plan without the store: members, workers at once, the devices asked for (no dataset drawn)."""
        family = self.family()
        members = self.members(family)
        first = members[0][1]
        if family is None:
            source = "--device" if self.device else f"compute.device (preset {first.source})"
            devices = [(first.compute.device, source)]
        else:
            source = "--device" if self.device else "compute.device (family members)"
            devices = [(device, source) for device in sorted({p.compute.device for _, p in members})]
        return LaunchPlan(
            self,
            tuple(Member(name, preset) for name, preset in members),
            family,
            self.workers.parallel if self.workers.parallel is not None else first.compute.max_parallel_jobs,
            max(p.compute.threads_per_worker for _, p in members),
            tuple(devices),
        )

    def resolve(self, store: Store, *, dry_run: bool = False) -> LaunchPlan:
        """The plan: every member's preset, dataset and splits (drawn and checked against its data), the
        workers at once, and the devices checked where local workers would use them. Nothing is written
        (but built-in synthetic data, registered on first use unless `dry_run`)."""
        plan = self.shape()
        if not dry_run:
            self.workers.check_here(plan.devices)
        return plan.drawn(store, dry_run=dry_run)


@dataclass(frozen=True)
class Member:
    name: str
    """The family member's name; "" for a lone study."""
    preset: Preset
    dataset_id: str = ""
    drawn: DrawnSplits | None = None
    """Its splits, drawn and checked against the dataset (`LaunchPlan.drawn`)."""

    @property
    def splits(self) -> DrawnSplits:
        assert self.drawn is not None, "a plan's splits are drawn (LaunchPlan.drawn) before a launch"
        return self.drawn


@dataclass(frozen=True)
class LaunchPlan:
    """What a launch creates and how it runs: what the orchestrator is handed."""

    request: LaunchRequest
    members: tuple[Member, ...]
    family: Family | None
    parallel: int
    """Worker processes at once: --parallel, else the (first) preset's compute.max_parallel_jobs."""
    threads: int
    devices: tuple[tuple[str, str], ...]

    def drawn(self, store: Store, *, dry_run: bool = False) -> LaunchPlan:
        """The plan with each member's dataset found (built-in synthetic data registered on first use,
        unless `dry_run`) and its splits drawn and checked against it; nothing else is written."""
        dataset_of = registered_dataset if dry_run else ensure_dataset
        # What the presets say about levels is checked against each dataset's levels first: before built-in
        # data is generated and registered, and before any split is drawn.
        for m in self.members:
            check_member_levels(store, m, self.request.dataset or m.preset.data.dataset)
        members = []
        for m in self.members:
            dataset_id = dataset_of(store, self.request.dataset or m.preset.data.dataset)
            members.append(replace(m, dataset_id=dataset_id, drawn=study_splits(store, m.preset, dataset_id)))
        return replace(self, members=tuple(members))


def _levels_of(store: Store, ref: str) -> Levels | None:
    """The levels of the dataset a preset names: built-in synthetic data's from its definition (it may not
    be generated yet); None where the dataset is not found (the launch then refuses it by its own rule)."""
    if ref.startswith(SYNTHETIC_PREFIX):
        spec = BUILT_IN.get(ref[len(SYNTHETIC_PREFIX) :])
        return None if spec is None else Levels.of(spec.level_names)
    try:
        return dataset_levels(store, registered_dataset(store, ref))
    except HierconsoleError:
        return None


def check_member_levels(store: Store, member: Member, ref: str) -> None:
    """The preset's level options (`training.levels`, `level_weights`, `regression_targets`,
    `evaluation.hier_levels`, `split.level`, `selection_score`) against the levels of dataset `ref`:
    ConfigError, one line naming the option, the value and the dataset's levels, if one does not fit."""
    who = f"family member {member.name!r}, " if member.name else ""
    check_components(member.preset, who)
    levels = _levels_of(store, ref)
    if levels is None:
        return
    try:
        check_levels(member.preset, levels)
    except LevelError as exc:
        raise ConfigError(f"{who}dataset {ref!r}: {exc}") from None
    split = member.preset.split
    # A level named otherwise than `leaf` (CUB's "Class", or 1) is the leaf too: its groups are single leaves.
    if split.protocol == "hierarchy_disjoint" and split_level_index(levels, split.level) == 0:
        raise ConfigError(
            f"{who}dataset {ref!r}: split.level = {split.level!r} is the leaf level; a hierarchy-disjoint split "
            f"keeps the groups of a level above it apart (the dataset's levels are {levels.describe()})"
        )


@dataclass
class Launched:
    plan: LaunchPlan
    study_ids: list[str]
    family_id: str | None
    executor: JobExecutor | None
    """The executor its jobs run on; None: the orchestrator's local one."""

    def orchestrator(self, store: Store) -> Orchestrator:
        """The orchestrator that drives this launch's jobs, and only theirs (leftovers of earlier studies
        are shown by `runs` and run by `resume`), on the launch's executor; the caller ticks it, then
        closes its executors."""
        gpus = self.plan.request.workers.gpus
        return Orchestrator(
            store,
            max_parallel=self.plan.parallel,
            gpus=list(gpus) if gpus else None,
            studies=self.study_ids,
            executor=self.executor,
        )


def open_executor(
    store: Store, workers: Workers, *, parallel: int, threads: int, devices: Sequence[tuple[str, str]]
) -> JobExecutor | None:
    """The executor the request names, its devices checked where its workers run: None for local workers
    (this machine probed), or a Ray cluster connected to now."""
    if workers.executor == Executor.LOCAL:
        workers.check_here(devices)
        return None
    from hierconsole.study.executors.ray_cluster import RayExecutor  # imports ray: only when asked for

    # A local instance runs as many jobs at once as the local executor would; a cluster as many as it
    # has CPUs for, unless --parallel says otherwise.
    local = workers.ray_address == LOCAL_RAY
    executor = RayExecutor(
        store.home,
        workers.ray_address,
        num_cpus=max(os.cpu_count() or 1, parallel * threads) if local else None,
        parallel=workers.parallel if workers.parallel is not None else (parallel if local else None),
        connect_timeout=workers.ray_connect_timeout,
    )
    try:
        check_on(executor, devices)
    except BaseException:
        executor.close()
        raise
    return executor


def check_on(executor: JobExecutor, devices: Sequence[tuple[str, str]]) -> None:
    """The devices asked for, checked on the executor's own machines (a Ray cluster's nodes)."""
    check = getattr(executor, "check_device", None)
    if check is not None:
        for device, source in devices:
            check(device, source)


def launch(store: Store, request: LaunchRequest, *, executor: JobExecutor | None = None) -> Launched:
    """Check the request against this machine (or connect its Ray cluster and check there; or check on the
    executor given), draw its splits, then create the study or the family: its jobs are queued for the
    orchestrator. Nothing is created if a check fails."""
    shape = request.shape()
    opened = executor is None
    if executor is None:
        executor = open_executor(store, request.workers, parallel=shape.parallel, threads=shape.threads, devices=shape.devices)
    else:
        check_on(executor, shape.devices)
    try:
        plan = shape.drawn(store)
        studies: list[str]
        if plan.family is not None:
            family_id, studies = create_family(
                store, plan.family, [m.dataset_id for m in plan.members], [m.splits for m in plan.members]
            )
        else:
            (member,) = plan.members
            family_id, studies = None, [create_study(store, member.preset, member.dataset_id, drawn=member.splits)]
    except BaseException:
        if opened and executor is not None:
            executor.close()
        raise
    return Launched(plan, studies, family_id, executor)


def launch_on(orch: Orchestrator, request: LaunchRequest) -> Launched:
    """Launch from the orchestrator's own thread (the console's): a Ray request's jobs are handed to the
    orchestrator's Ray executor before any tick could start them locally."""
    executor = orch.ray_executor(request.workers.ray_address) if request.workers.executor == Executor.RAY else None
    launched = launch(orch.store, request, executor=executor)
    if executor is not None:
        orch.assign(launched.study_ids, executor)
    return launched

