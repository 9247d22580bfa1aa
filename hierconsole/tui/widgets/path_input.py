"""Text fields of the dialogs: `FieldInput`, whose cursor blinks only where the app lets it (a headless
app's screenshots must not depend on when they were taken), and `PathInput`, which completes file and
folder names as you type (→ accepts the completion)."""

from __future__ import annotations

import os
from pathlib import Path

from textual.suggester import Suggester
from textual.widgets import Input


def complete_path(value: str) -> str | None:
    """The first existing entry that extends `value` (folders end with a slash), or None."""
    if not value:
        return None
    expanded = os.path.expanduser(value)
    folder, prefix = os.path.split(expanded)
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return None
    for name in names:
        if name == prefix and Path(expanded).is_dir():
            return value + os.sep
        if (
            name.startswith(prefix)
            and name != prefix
            and not (name.startswith(".") and not prefix.startswith("."))
        ):
            completed = os.path.join(folder, name)
            if Path(completed).is_dir():
                completed += os.sep
            # Keep what the user typed (a leading ~ stays a ~).
            return value + completed[len(expanded) :]
    return None


class PathSuggester(Suggester):
    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        return complete_path(value)


class FieldInput(Input):
    def on_mount(self) -> None:
        self.cursor_blink = getattr(self.app, "cursor_blink", True)


class PathInput(FieldInput):
    def __init__(self, placeholder: str = "", **kwargs) -> None:
        super().__init__(placeholder=placeholder, suggester=PathSuggester(), **kwargs)
