"""hierconsole: controlled hierarchy-aware retrieval studies on frozen image features.

From Python: `hierconsole.open_home(path)` (the notebook API, `hierconsole.notebook`), loaded on first
use so that importing the package loads nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hierconsole.notebook import open_home

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "open_home":
        from hierconsole.notebook import open_home

        globals()["open_home"] = open_home
        return open_home
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", "open_home"]
