"""The components a factorial crosses: each geometry and objective by the name a preset uses, its arm
code and where its implementation lives (the built-ins' own: `hierconsole.components`). Standard library only: presets, arm names and effects read it without
torch; `load` imports a component's module when a job (or the launch's protocol check) needs it.

A geometry is a class built as ``Cls(c=..., r=...)`` (the study's `[geometry.poincare]` operating point,
which a Euclidean map ignores) whose instances provide ``embed(raw [..., D]) -> [..., D']`` (the map into
the geometry) and ``pairwise(x, y=None, *, clip_max) -> [..., N, M]`` (the distance used both to rank and,
within a batch, for the logits and regression targets). An objective is a class built without arguments
whose instances provide ``uses_tau: bool`` and ``loss(dist [C, B, B], labels [B, K], *, tau, training)
-> [C]``: one loss per cell from its within-batch distances, `labels` one column per trained level (leaf
first), `tau` a [C] tensor of temperatures (None when ``uses_tau`` is false), `training` the preset's
`[training]` table (regression targets, level weights).

An objective may own parameters: one with ``prototypes = True`` is given a learnt prototype per leaf of
the taxonomy (a [N, D] tensor a cell, mapped into the cell's geometry by its ``embed``; the engine draws,
optimises, clips and checkpoints them, and counts them apart from the projector), and its ``loss`` takes
two more keywords: ``prototype_dist`` [C, B, N], each sample's distance to each leaf's prototype, and
``leaf_labels`` [N, K], each leaf's labels at the trained levels.

A preset names a built-in by its name (`lorentz`) and a component of its own as ``module:Name`` (the module
importable from the study's working directory or the Python path), or by the name of an entry point in the
group ``hierconsole.components`` that an installed package declares (``margin = "mypkg.losses:Margin"``);
the component's code in arm names is its class name without underscores (`E_MyLoss`, `E_Margin`). A preset
keeps an entry point as the module:ClassName it names when it is read, so a study never needs the entry
point again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Kind = Literal["geometry", "objective"]

MAX_FACTORS = 6
"""At most this many geometries, and as many objectives, in one factorial."""


@dataclass(frozen=True)
class Component:
    """One geometry or objective a factorial may name."""

    kind: Kind
    name: str
    """As a preset writes it: `lorentz`, or `package.module:ClassName` for a component of one's own."""
    code: str
    """Its part of an arm's name (`L` in `L_S`)."""
    target: str
    """``module:attribute`` of the implementation."""
    label: str
    """How a legend names it."""
    takes_tau: bool = False
    """A built-in objective that takes a temperature (its geometry's, fixed or tuned); one's own objective
    says so by its class's ``uses_tau`` and gets its geometry's temperature either way."""

    @property
    def builtin(self) -> bool:
        return self.name in (GEOMETRIES if self.kind == "geometry" else OBJECTIVES)


def _builtin(kind: Kind, name: str, code: str, target: str, label: str, tau: bool = False) -> tuple[str, Component]:
    return name, Component(kind, name, code, target, label, tau)


GEOMETRIES: dict[str, Component] = dict(
    (
        _builtin("geometry", "euclidean", "E", "hierconsole.engine.geometry:Euclidean", "Euclidean"),
        _builtin("geometry", "poincare", "H", "hierconsole.engine.geometry:Poincare", "Poincaré (hyperbolic)"),
        _builtin("geometry", "lorentz", "L", "hierconsole.components.lorentz:Lorentz", "Lorentz (hyperboloid)"),
        _builtin("geometry", "product", "M", "hierconsole.components.product:Product", "Euclidean × Poincaré (mixed)"),
    )
)
"""The built-in geometries, in the order their arms are listed."""

OBJECTIVES: dict[str, Component] = dict(
    (
        _builtin("objective", "regression", "R", "hierconsole.components.objectives:Regression", "regression"),
        _builtin("objective", "supcon", "S", "hierconsole.components.objectives:TaxonomySupCon", "Taxonomy-SupCon", True),
        _builtin("objective", "soft_ce", "C", "hierconsole.components.soft_ce:SoftCE", "soft-label CE", True),
        _builtin("objective", "flat_supcon", "F", "hierconsole.components.flat_supcon:FlatSupCon", "flat (leaf) SupCon", True),
    )
)
"""The built-in objectives, in the order their arms are listed."""

_REQUIRED: dict[Kind, tuple[str, ...]] = {"geometry": ("embed", "pairwise"), "objective": ("loss", "uses_tau")}


class ComponentError(ValueError):
    """A component name that resolves to nothing usable; the message is one line naming what is wrong."""


def component(kind: Kind, name: str) -> Component:
    """The component a preset names: a built-in, or ``module:Name`` (its code: Name without underscores).
    Raises ComponentError for a name that is neither (nothing is imported here)."""
    builtins = GEOMETRIES if kind == "geometry" else OBJECTIVES
    if name in builtins:
        return builtins[name]
    target = name if ":" in name else entry_points().get(name, "")
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        if target and target != name:
            raise ComponentError(f"{kind} {name!r}: its entry point in {ENTRY_POINT_GROUP} names {target!r}, not module:ClassName")
        raise ComponentError(
            f"unknown {kind} {name!r}: expected one of {', '.join(builtins)}, module:ClassName for your own, "
            f"or the name of an installed entry point in {ENTRY_POINT_GROUP}"
        )
    code = attr.replace("_", "")
    problem = custom_code_problem(code)
    if problem:
        raise ComponentError(f"{kind} {name!r}: {problem}")
    return Component(kind, name, code, target, attr)


ENTRY_POINT_GROUP = "hierconsole.components"
"""The entry-point group an installed package declares its components in (name -> module:ClassName)."""


@functools.cache
def entry_points() -> dict[str, str]:
    """name -> ``module:ClassName`` of every installed entry point in ENTRY_POINT_GROUP (read from the
    installed distributions' metadata once a process: nothing is imported)."""
    from importlib.metadata import entry_points as installed

    return {ep.name: ep.value for ep in installed(group=ENTRY_POINT_GROUP)}


def custom_code_problem(code: str) -> str | None:
    """Why a class name cannot be the arm code of one's own component (None if it can): it must be an
    identifier of two or more characters, not all capitals, so that no arm of one's own is a misspelt arm
    of built-ins (`E_RR`, `X_Q` stay errors wherever arms are read)."""
    if len(code) < 2 or not code.isidentifier() or code.upper() == code:
        return f"its class name gives the arm code {code!r}; use a class name of two or more characters with a lower-case letter (e.g. SoftCE)"
    return None


COMPONENTS_FOLDER = "components"
"""A study's folder of its own components' source, copied at launch: its workers import them from there."""


def module_file(c: Component) -> Path | None:
    """The source file of a component of one's own, imported to find it (None where its module is no
    single `.py` file, e.g. a compiled extension)."""
    load(c)
    path = getattr(sys.modules[c.target.partition(":")[0]], "__file__", None)
    return Path(path) if path and path.endswith(".py") else None


def _on_path(folder: str) -> bool:
    return folder in sys.path or "" in sys.path


def load(c: Component) -> Any:
    """The component's class, imported (a component of one's own runs its module's top level here; its
    module is looked for on the Python path, then in the working directory)."""
    module, _, attr = c.target.partition(":")
    if not c.builtin and not _on_path(os.getcwd()):
        sys.path.append(os.getcwd())  # after every other entry: the path's own modules win
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # one's own module may raise anything at import: said in one line
        raise ComponentError(f"{c.kind} {c.name!r}: cannot import module {module!r} ({type(exc).__name__}: {exc})") from None
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ComponentError(f"{c.kind} {c.name!r}: module {module!r} has no {attr!r}") from None


def protocol_problem(c: Component) -> str | None:
    """Why the component cannot serve as its kind (None if it can): imported, a class, with every method
    and attribute the protocol needs. What the methods compute is audited on the study's own results."""
    try:
        cls = load(c)
    except ComponentError as exc:
        return str(exc)
    if not inspect.isclass(cls):
        return f"{c.kind} {c.name!r} is not a class"
    missing = [m for m in _REQUIRED[c.kind] if not hasattr(cls, m)]
    if missing:
        return f"{c.kind} {c.name!r} lacks {', '.join(missing)} (a {c.kind} provides {', '.join(_REQUIRED[c.kind])})"
    # Built as the engine builds it: a geometry at the study's operating point, an objective bare.
    arguments = {"c": 1.0, "r": 1.0} if c.kind == "geometry" else {}
    try:
        inspect.signature(cls).bind(**arguments)
    except TypeError:
        how = "c=… and r=… (the study's curvature and tangent scale)" if arguments else "no argument"
        return f"{c.kind} {c.name!r} cannot be built with {how}"
    except ValueError:
        pass  # no signature to read (a builtin type): built as it is
    return None


def source_sha256(path: Path) -> str:
    """SHA256 of a component's source file (what a study records of its own components)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
