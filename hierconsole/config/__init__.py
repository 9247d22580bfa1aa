"""A study's configuration: the preset as frozen, validated dataclasses, and the TOML files they come from.

A shared leaf: the orchestrator validates and records presets, and the same frozen objects travel to the
worker processes inside each job spec (`contract.jobspec`), so every default lives here once.
"""

from hierconsole.config.files import list_presets, load_preset, presets_dir, resolve_preset
from hierconsole.config.preset import (
    TUNE,
    ComputeConfig,
    ControlsConfig,
    EvaluationConfig,
    PoincareConfig,
    Preset,
    TrainingConfig,
)

__all__ = [
    "TUNE",
    "ComputeConfig",
    "ControlsConfig",
    "EvaluationConfig",
    "PoincareConfig",
    "Preset",
    "TrainingConfig",
    "list_presets",
    "load_preset",
    "presets_dir",
    "resolve_preset",
]
