"""Where hierconsole keeps its store and artifacts: one home folder, and every path inside it.

Paths that are stored (in DuckDB rows and job specs) are relative to the home, so that a home can be
copied or moved; `resolve` turns one back into a path on this machine. A stored absolute path (written
by an earlier version) resolves to itself.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from hierconsole.errors import REASON_CHARS, HierconsoleError, bounded

ENV_HOME = "HIERCONSOLE_HOME"
DB_NAME = "hierconsole.duckdb"


def resolve_home(home: str | os.PathLike[str] | None = None, *, create: bool = True) -> Path:
    """The home folder: the explicit argument, else $HIERCONSOLE_HOME, else platformdirs' user data dir;
    created if missing unless `create` is False (read commands create nothing)."""
    if home is None:
        home = os.environ.get(ENV_HOME) or _default_home()
    path = Path(home).expanduser().resolve()
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HierconsoleError(
                f"cannot create the home folder {path}: {exc.strerror or exc}; pass --home DIR (or "
                f"HIERCONSOLE_HOME) naming a folder you can write"
            ) from None
    return path


def db_path(home: Path) -> Path:
    return home / DB_NAME


def wal_path(store: Path) -> Path:
    """The write-ahead log DuckDB keeps beside a store file: it moves and goes with the file."""
    return store.with_name(store.name + ".wal")


def dataset_dir(home: Path, dataset_id: str) -> Path:
    """The self-contained folder of a registered dataset, which workers load without the store."""
    return home / "datasets" / _component(home, dataset_id, "dataset")


def study_dir(home: Path, study_id: str) -> Path:
    return home / "studies" / _component(home, study_id, "study")


STUDY_RECORD = "study.json"


def study_record(home: Path, study_id: str) -> Path:
    """The rows a study's creation inserted and its first jobs (`lifecycle.create_study`), which a rebuild
    from a backup taken before the study re-inserts (`doctor --repair`)."""
    return study_dir(home, study_id) / STUDY_RECORD


def family_record(home: Path, family_id: str) -> Path:
    """The rows a family's creation inserted (`families.create_family`), which a rebuild from a backup
    taken before the family re-inserts once its member studies are back (`doctor --repair`)."""
    return home / "families" / f"{_component(home, family_id, 'family')}.json"


def report_path(home: Path, ref: str) -> Path:
    """Where the console writes the report of a study or family: HOME/reports/REF.html."""
    return home / "reports" / f"{_component(home, ref, 'report of')}.html"


def job_dir(home: Path, job_id: str) -> Path:
    """A job's folder: its spec, events, heartbeat, checkpoints and outputs. Job ids are `<study>/<name>`."""
    study_id, name = job_id.split("/", 1)
    return study_dir(home, study_id) / "jobs" / _component(home, name, "job")


def _component(home: Path, name: str, what: str) -> str:
    """`name` as one folder name under the home, refused when it is not one.

    Names are checked where a user gives them (`hierconsole.names`); this is the second line, for an id
    that reaches a path some other way (a damaged or crafted store's row, a caller's bug): an empty name,
    `.`, `..` or one holding a separator would make the path leave its folder, and then the home.
    """
    if name in ("", ".", "..") or any(sep in name for sep in ("/", "\\", os.sep, "\0")):
        raise HierconsoleError(
            f"{what} {bounded(repr(name), REASON_CHARS)} is no folder name: its path would lead outside the "
            f"home {home}; refused (a name holds letters, digits and . _ = + - only)"
        )
    return name


def inside_home(home: Path, path: Path, what: str) -> Path:
    """`path`, refused unless it lies strictly inside the home, `..` followed, and is no symbolic link
    itself: what is about to be deleted or overwritten must never be outside it, whatever a stored row
    says. The home's own folders may be links to another disk (`datasets/` on a larger one): the check
    is of the path, not of where the home's folders lie."""
    root, real = Path(os.path.abspath(home)), Path(os.path.normpath(os.path.abspath(path)))
    if real == root or not real.is_relative_to(root) or real.is_symlink():
        raise HierconsoleError(
            f"{what}: its folder {path} is outside the home {home} (it leads to {real.resolve()}); refused, "
            f"nothing was deleted (the store's row was damaged or written by hand)"
        )
    return path


def relative(home: Path, path: Path) -> str:
    """`path` as the string to store: relative to `home`, with forward slashes on every system.

    A path outside the home (an earlier version's absolute row) is stored as it is.
    """
    try:
        return PurePosixPath(Path(path).relative_to(home)).as_posix()
    except ValueError:
        return str(path)


def resolve(home: Path, stored: str) -> Path:
    """A stored path on this machine: relative ones are inside `home`; absolute ones stay as they are."""
    return home / stored


def resource_dir(name: str) -> Path:
    """A shipped folder (`store/`, `presets/`, `paper/`): top-level in a checkout, `_<name>` inside a wheel."""
    pkg = Path(__file__).resolve().parent
    for candidate in (pkg / f"_{name}", pkg.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hierconsole resource folder {name!r} is missing from the installation")


def _default_home() -> str:
    # Imported here: workers import this module (job paths) and must run where platformdirs is absent.
    import platformdirs

    return platformdirs.user_data_dir("hierconsole", appauthor=False)
