"""A worker-only interpreter: every installed package outside torch (and what it requires), numpy, geoopt
(and scipy, which geoopt imports) made unimportable, as on a GPU machine that has torch and numpy and takes
geoopt and hierconsole as carried wheels.

`worker_only_env(folder)` writes a sitecustomize into `folder` and returns the environment of a
subprocess that starts with it. The blocker is a meta-path finder placed first: an import of a blocked
top-level name raises ModuleNotFoundError (as a missing package would, so torch's optional imports fall
back as they would there) and is appended to $HIERCONSOLE_BLOCKED_LOG.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import textwrap
from pathlib import Path

ALLOWED_DISTRIBUTIONS = ("torch", "numpy", "geoopt", "scipy")
BLOCKED_LOG_ENV = "HIERCONSOLE_BLOCKED_LOG"


def _name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def allowed_distributions() -> set[str]:
    """The allowed distributions and, transitively, what they require unconditionally (no extras); and
    hierconsole itself, whose own requirements are what this blocks."""
    todo, seen = list(ALLOWED_DISTRIBUTIONS), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen | {"hierconsole"}


def blocked_modules() -> list[str]:
    """Top-level import names of every installed distribution that is not allowed."""
    allowed = allowed_distributions()
    blocked = {
        top
        for top, dists in md.packages_distributions().items()
        if not any(_name(d) in allowed for d in dists) and not top.startswith("_")
    }
    return sorted(blocked)


def worker_only_env(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    blocked = blocked_modules()
    (folder / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""
            import os, sys

            BLOCKED = frozenset({blocked!r})

            class WorkerOnly:
                def find_spec(self, name, path=None, target=None):
                    top = name.partition(".")[0]
                    if top in BLOCKED:
                        log = os.environ.get({BLOCKED_LOG_ENV!r})
                        if log:
                            with open(log, "a") as fh:
                                fh.write(name + "\\n")
                        raise ModuleNotFoundError(f"No module named {{name!r}} (worker-only test)", name=name)
                    return None

            sys.meta_path.insert(0, WorkerOnly())
            """
        )
    )
    root = Path(__file__).resolve().parents[1]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), str(root)]),
        BLOCKED_LOG_ENV: str(folder / "blocked.log"),
    }
