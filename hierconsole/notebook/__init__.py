"""The notebook API: a hierconsole home read (and studies launched) from Python.

    import hierconsole as hc
    home = hc.open_home("~/hierconsole-home")
    home.studies()                      # polars DataFrames; pandas: .to_pandas()
    home.effects("demo", summary=True)

A front end like `cli/` and `tui/`, built on the read layer (`hierconsole.study.read`) and, to launch, the
front door (`hierconsole.study.commands`): the numbers are the ones `hierconsole ... --json` prints. Domain code never imports it. Its modules load on first use, so
`import hierconsole` stays light (no DuckDB, polars or torch until a home is opened).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hierconsole.notebook.home import Home, open_home
    from hierconsole.notebook.launch import RunHandle

_HOMES = {"Home": "home", "open_home": "home", "RunHandle": "launch"}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["Home", "RunHandle", "open_home"]
