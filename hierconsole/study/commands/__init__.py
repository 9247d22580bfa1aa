"""The front door: every verb a front end runs (launch, resume, cancel, delete, rescore, import or delete a
dataset, repair a home: `doctor`, replicate the paper: `replicate`), each input checked here once, and the
orchestrator that drives the jobs they queue."""

from hierconsole.study.commands.launching import (
    LOCAL_RAY,
    RAY_CONNECT_TIMEOUT,
    Launched,
    LaunchPlan,
    LaunchProblems,
    LaunchRequest,
    Member,
    Problem,
    Workers,
    executor_name,
    launch,
    launch_on,
    open_executor,
)
from hierconsole.study.commands.verbs import (
    IMPORT_SOURCES,
    Reconciliation,
    Resumed,
    cancel,
    delete,
    delete_dataset,
    import_dataset,
    read_dataset,
    reconcile,
    rescore,
    resume,
    save_audits,
)
from hierconsole.study.run.orchestrator import Orchestrator, ProblemCallback

__all__ = [
    "IMPORT_SOURCES",
    "LOCAL_RAY",
    "RAY_CONNECT_TIMEOUT",
    "LaunchPlan",
    "LaunchProblems",
    "LaunchRequest",
    "Launched",
    "Member",
    "Orchestrator",
    "Problem",
    "ProblemCallback",
    "Reconciliation",
    "Resumed",
    "Workers",
    "cancel",
    "delete",
    "delete_dataset",
    "import_dataset",
    "launch",
    "executor_name",
    "launch_on",
    "open_executor",
    "read_dataset",
    "reconcile",
    "rescore",
    "resume",
    "save_audits",
]
