"""Preset files: TOML on disk, shipped presets by bare name, and their listing."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hierconsole.bounded_input import read_document
from hierconsole.config.preset import Preset
from hierconsole.errors import ConfigError, NotFoundError
from hierconsole.locations import resource_dir


def read_toml(path: Path, what: str = "preset") -> dict[str, Any]:
    """A TOML file's tables; a file that cannot be read or parsed is a ConfigError naming it."""
    try:
        # Within bounds: a device or a huge file is refused at MAX_DOCUMENT_BYTES, not read whole.
        return tomllib.loads(read_document(path, f"a {what} file").decode())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # tomllib decodes the whole file first: random bytes fail there
        raise ConfigError(
            f"{path}: not a {what} file: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "give a TOML text file"
        ) from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


def presets_dir() -> Path:
    return resource_dir("presets")


def resolve_preset(path_or_name: str | Path) -> Path:
    """A preset file: an existing path as given, else a bare name (`demo`) among the shipped presets."""
    return resolve_toml(path_or_name, presets_dir(), "preset", lambda: [name for name, _, _ in list_presets()])


def resolve_toml(path_or_name: str | Path, folder: Path, what: str, shipped: Callable[[], list[str]]) -> Path:
    """An existing path as given, else a bare name (with or without `.toml`) of a file in `folder`;
    a miss lists the `shipped` names."""
    path = Path(path_or_name).expanduser()
    if path.is_file():
        return path
    text = str(path_or_name)
    if "/" not in text and "\\" not in text:
        stem = text[: -len(".toml")] if text.endswith(".toml") else text
        candidate = folder / f"{stem}.toml"
        if candidate.is_file():
            return candidate
    raise NotFoundError(
        f"{what} {text!r} not found: no such file, and no shipped {what} of that name; "
        f"shipped {what}s: {', '.join(shipped()) or '(none)'}"
    )


def load_preset(path_or_name: str | Path) -> Preset:
    """Load and validate a preset from a TOML file path or a shipped preset's bare name."""
    path = resolve_preset(path_or_name)
    return Preset.from_dict(read_toml(path), source=path)


def list_presets() -> list[tuple[str, Path, str]]:
    """Shipped presets as (bare name, path, description), sorted by name.

    A file that cannot be read is still listed, with the reason as its description, so that a broken
    preset shows up where users look rather than vanishing.
    """
    out = []
    for path in sorted(presets_dir().glob("*.toml"), key=lambda p: p.stem):
        try:
            study = read_toml(path).get("study", {})
            description = study.get("description", "") if isinstance(study, Mapping) else ""
        except ConfigError as exc:
            description = f"(unreadable: {exc})"
        out.append((path.stem, path, str(description)))
    return out
