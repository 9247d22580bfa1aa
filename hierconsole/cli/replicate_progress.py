"""What `replicate` shows while it works: one live line per running stage (its elapsed time and the last
line its command printed) under a whole-pipeline bar with the time left; plain start/done lines when the
output is not a terminal (a log, CI), so nothing is redrawn into a file."""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.text import Text

from hierconsole.cli.replicate_stages import Replication

_LINE = 70


class StageProgress:
    def __init__(self, console: Console, stages: Sequence[str], rep: Replication) -> None:
        self.console = console
        self.stages = list(stages)
        self.rep = rep
        self.running: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        """Each finished stage's wall time, in the order they finished."""
        self.live: Live | None = None

    def __enter__(self) -> StageProgress:
        if self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=4, transient=True, get_renderable=self._render)
            self.live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.live is not None:
            self.live.__exit__(kind, exc, tb)

    def stage(self, name: str, finished: bool) -> None:
        """A stage started (finished False) or finished."""
        now = time.monotonic()
        if not finished:
            self.running[name] = now
            self._say(f"{name}: started")
        else:
            self.seconds[name] = now - self.running.pop(name, now)
            self._say(f"{name}: done in {self.seconds[name]:.1f}s")

    def warn(self, text: str) -> None:
        self.console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False)

    def _say(self, text: str) -> None:
        # Finished and started stages scroll above the live lines; without a terminal they are the log.
        self.console.print(escape(text), highlight=False)

    def _render(self) -> Group:
        now = time.monotonic()
        total = len(self.stages)
        lines: list[Text | ProgressBar] = []
        for name, since in list(self.running.items()):  # stages start and end meanwhile
            log = self.rep.logs.get(name)
            last = (log.last if log else "")[:_LINE]
            lines.append(Text(f"{name:<18} {now - since:6.0f}s  {last}"))
        bar = ProgressBar(total=total, completed=len(self.seconds), width=30)
        mean = sum(self.seconds.values()) / len(self.seconds) if self.seconds else None
        left = total - len(self.seconds)
        eta = f", about {mean * left:.0f}s left at this pace" if mean is not None and left else ""
        lines += [bar, Text(f"{len(self.seconds)} of {total} stages done{eta}")]
        return Group(*lines)
