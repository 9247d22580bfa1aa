"""User-facing errors. Every message says what is wrong, where, and how to fix it.

The CLI prints these without a traceback and exits with status 2; the TUI shows them in place.
"""

from __future__ import annotations

from pathlib import Path

INTERRUPTED_EXIT = 130
"""The exit status of a command Ctrl-C ended (128 + SIGINT, as shells report it): a study's run, a family's
and a resume alike (their jobs cancelled, resumable)."""
TERMINATED_EXIT = 143
"""The exit status of a command SIGTERM ended (128 + SIGTERM): it stops as Ctrl-C stops it, whatever it
was waiting on (a cluster's answer, a worker's start, its jobs' cancel)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt, so that whatever the command
    waits on is left through the same `finally` blocks (workers stopped, the store closed)."""

MESSAGE_CHARS = 2_000
"""The most characters an error prints: a message quoting a 10^6-column header stays a line, not megabytes."""
REASON_CHARS = 300
"""The most characters of one problem, or of a library's reason quoted inside one."""
_ONE_LINE_PROBLEMS = 3
"""The problems a one-line message names (the rest are counted): a line, not a report."""


def bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    """`text` cut to `limit` characters, saying how long it was, so a quoted value can never flood a terminal."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... (cut: {len(text):,} characters in all)"


class HierconsoleError(Exception):
    """Base class of errors that are the user's to fix, not bugs."""

    exit_code = 2


class InputError(HierconsoleError):
    """Bad input data: a file, a row, a value.

    Problems are collected so that one import reports every issue at once rather than one per attempt.
    """

    def __init__(self, source: str | Path, problems: list[str] | str, hint: str | None = None):
        self.source = str(source)
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.hint = hint
        super().__init__(self._render())

    def one_line(self, option: str | None = None) -> str:
        """The message on one line, its source given as `option SOURCE` when the source is the value of a
        command-line option (a command that checks all its inputs up front refuses each with one line)."""
        where = self.source if option is None or self.source.startswith("-") else f"{option} {self.source}"
        shown = [" ".join(p.split()) for p in self.problems[:_ONE_LINE_PROBLEMS]]
        if len(self.problems) > len(shown):
            shown.append(f"and {len(self.problems) - len(shown)} more problems")
        line = f"{bounded(where, REASON_CHARS)}: " + "; ".join(bounded(p, REASON_CHARS) for p in shown)
        return f"{line}; fix: {' '.join(self.hint.split())}" if self.hint else line

    def _render(self) -> str:
        shown = self.problems[:50]
        lines = [f"{bounded(self.source, REASON_CHARS)}:"] + [f"  - {bounded(p, REASON_CHARS)}" for p in shown]
        if len(self.problems) > len(shown):
            lines.append(f"  ... and {len(self.problems) - len(shown)} more problems")
        if self.hint:
            lines.append(f"  fix: {self.hint}")
        return "\n".join(lines)


class ConfigError(HierconsoleError):
    """A preset or option with a wrong key or value."""


class StoreBusyError(HierconsoleError):
    """Another process holds the DuckDB store."""


class StoreDamagedError(HierconsoleError):
    """The store file is truncated, garbled, not a hierconsole store, or of an unknown version."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message
        """What is wrong with the file, without the way back (the note of a repair that skips a damaged
        backup quotes it: the way back the message gives is that very repair)."""


class StoreNeedsUpgradeError(StoreDamagedError):
    """A sound store of an older schema, opened by a command that does not write (which would upgrade it)."""


class StoreReadOnlyError(HierconsoleError):
    """A command that writes was pointed at a store it may not write (a read-only home)."""


class StoreWriteError(HierconsoleError):
    """A commit to the store failed (a full disk, an I/O error): the run stops rather than hang."""


class NotFoundError(HierconsoleError):
    """A dataset, study, run or table that does not exist."""


class SealError(HierconsoleError):
    """The official test split was asked for before the study was locked."""


class NoPositivePairsError(HierconsoleError):
    """A minibatch holds no positive taxonomy relation at any active level."""
