"""A study's components of its own (`module:Name` in its `[factorial]`): checked against the protocol
before anything is created, their source copied into the study and its hash recorded, so its workers
(here, on another machine, after the file was edited) train what was launched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hierconsole.config.preset import Preset
from hierconsole.contract.durable import write_atomically
from hierconsole.errors import ConfigError
from hierconsole.registry import COMPONENTS_FOLDER, Component, module_file, protocol_problem, source_sha256

MANIFEST = "manifest.json"


def own_components(preset: Preset) -> tuple[Component, ...]:
    """The preset's geometries and objectives that are not built in."""
    f = preset.factorial
    return tuple(c for c in (*f.geometry_components, *f.objective_components) if not c.builtin)


def check_components(preset: Preset, who: str = "") -> None:
    """ConfigError (one line, naming the component and what it lacks) unless each of the preset's own
    components imports, provides its protocol and is a single source file a study can keep."""
    for c in own_components(preset):
        where = f"{who}factorial: "
        problem = protocol_problem(c)
        if problem is not None:
            raise ConfigError(where + problem)
        if module_file(c) is None:
            raise ConfigError(f"{where}{c.kind} {c.name!r}: its module is not a single .py file a study can keep a copy of")


def install_components(study_folder: Path, preset: Preset) -> None:
    """Copy the source of the preset's own components into the study (`components/`, at their module
    paths) with a manifest of each one's name, file and SHA256; nothing for a study of built-ins."""
    components = own_components(preset)
    if not components:
        return
    folder = study_folder / COMPONENTS_FOLDER
    manifest = {}
    for c in components:
        source = module_file(c)
        assert source is not None  # check_components refused it before the study was created
        module = c.target.partition(":")[0]
        target = folder / Path(*module.split(".")).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        manifest[c.name] = {"file": target.relative_to(folder).as_posix(), "sha256": source_sha256(target)}
    write_atomically(folder / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode())


def recorded_components(study_folder: Path) -> dict[str, dict[str, str]]:
    """name -> {file, sha256} of a study's own components (empty for a study of built-ins)."""
    path = study_folder / COMPONENTS_FOLDER / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {}
