"""The front door: every verb a front end runs (launch, resume, cancel, delete, rescore, import a dataset), each input checked here once."""

from hierconsole.study.commands.launching import (
    Launched,
    LaunchPlan,
    LaunchProblems,
    LaunchRequest,
    Member,
    Problem,
    Workers,
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
    import_dataset,
    read_dataset,
    reconcile,
    rescore,
    resume,
)

__all__ = [
    "IMPORT_SOURCES",
    "LaunchPlan",
    "LaunchProblems",
    "LaunchRequest",
    "Launched",
    "Member",
    "Problem",
    "Reconciliation",
    "Resumed",
    "Workers",
    "cancel",
    "delete",
    "import_dataset",
    "launch",
    "launch_on",
    "open_executor",
    "read_dataset",
    "reconcile",
    "rescore",
    "resume",
]
