"""A standby worker's protocol with the orchestrator that started it (`engine.worker`, `study.executors.standby`).

The standby is `python -m hierconsole.engine.worker --home HOME --standby`. Once its imports are done it
writes READY and a newline on standard output; then, for each spec path (one line) it reads on standard
input, it forks that job's worker and answers with the worker's PID (or `error ...`) on a line.
"""

from __future__ import annotations

STANDBY_FLAG = "--standby"
READY = b"ready"
"""The standby's first line: its imports are done and it forks at once."""
STANDBY_NAME = "hc-standby"
WORKER_NAME = "hc-worker"
"""Process names (what `top` and `ps -e` show) of a standby and of a worker, cold or forked: a forked
worker keeps its standby's command line, and takes its name before it leads a session of its own."""
