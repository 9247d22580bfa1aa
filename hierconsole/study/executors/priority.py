"""The scheduling priority of local workers: below the user's interactive commands.

Training is batch work that keeps every core busy; a read in a second shell, the console and the
orchestrator itself are what a user waits on. Workers therefore run at a niceness WORKER_NICENESS above
the orchestrator's. On an otherwise idle machine this changes nothing (no one competes for the cores);
while a run trains, a command typed beside it gets its CPU at once instead of a third of a core. GPU work
is unaffected: the device's queue has no niceness.

Workers start in sessions of their own (a Ctrl-C in the terminal is the orchestrator's to handle), and
Linux's scheduler, with autogroups on (the default of desktop and server kernels alike), shares the CPU
between sessions first and applies a process's niceness only inside its session: so the worker's session
(its autogroup) is niced too, where the kernel has one.
"""

from __future__ import annotations

import contextlib
import os

WORKER_NICENESS = 10
"""Added to the orchestrator's niceness for each worker (POSIX niceness runs from -20 to 19)."""


def run_in_background(pid: int) -> None:
    """Lower a just-started worker's priority, and its session's (no-op where the OS has no niceness or
    refuses it)."""
    with contextlib.suppress(AttributeError, OSError):
        niceness = min(19, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS)
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
        with open(f"/proc/{pid}/autogroup", "w") as group:  # absent without autogroups: OSError
            group.write(str(niceness))
