"""A worker process's exit statuses: what the process tells whoever started it, beside its events."""

from __future__ import annotations

EXIT_DONE = 0
EXIT_FAILED = 1
"""The traceback tail is in the last event and in error.txt."""
EXIT_CANCELLED = 3
"""SIGTERM: it stopped at the next step and recorded a cancelled event."""
EXIT_ALREADY_ACTIVE = 4
"""Another live worker holds the job's lock."""
EXIT_UNUSED = 5
"""A standby whose standard input closed before a job's spec arrived (imports done, no job run)."""
