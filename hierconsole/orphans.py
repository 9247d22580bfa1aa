"""Child processes that must not outlive the process that started them, however it dies."""

from __future__ import annotations

import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(_worker: int = 0) -> None:
    """Run in the child (a DataLoader worker_init_fn, a subprocess preexec_fn): the kernel kills it when
    its parent dies, however the parent dies.

    Without it a child outlives a SIGKILL of its parent, reparented to PID 1 for good (a decoding worker
    of `extract`, a stage command of `replicate`). Linux only (prctl); elsewhere nothing is asked.
    """
    import ctypes
    import ctypes.util

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
