"""Where hierconsole keeps its store and artifacts: one home folder."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

ENV_HOME = "HIERCONSOLE_HOME"
DB_NAME = "hierconsole.duckdb"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The home folder: the explicit argument, else $HIERCONSOLE_HOME, else platformdirs' user data dir."""
    if home is None:
        home = os.environ.get(ENV_HOME) or platformdirs.user_data_dir("hierconsole", appauthor=False)
    path = Path(home).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def db_path(home: Path) -> Path:
    return home / DB_NAME


def datasets_dir(home: Path) -> Path:
    return home / "datasets"


def runs_dir(home: Path) -> Path:
    return home / "runs"


def resource_dir(name: str) -> Path:
    """The `store/` or `presets/` folder: top-level in a checkout, `_store`/`_presets` inside a wheel."""
    pkg = Path(__file__).resolve().parent
    for candidate in (pkg / f"_{name}", pkg.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hierconsole resource folder {name!r} is missing from the installation")
