"""`replicate`'s inputs: each option read by the reader of the stage that will use it, before anything is
created (a stage would otherwise refuse it minutes or hours in), then hashed into the stages' keys."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from hierconsole.config.family import load_family, resolve_family
from hierconsole.config.files import resolve_preset
from hierconsole.datasets.checklist import read_aliases, read_checklist
from hierconsole.datasets.cub import cub_taxonomy, read_image_dir
from hierconsole.datasets.nabirds import read_nabirds_dir
from hierconsole.errors import HierconsoleError, InputError
from hierconsole.extraction.architectures import ARCHITECTURES, architecture
from hierconsole.extraction.weights import RANDOM, check_seed, weights_kind
from hierconsole.study.analysis.paper_tables import PAPER_TABLES_DIGEST
from hierconsole.study.executors import checked_executor
from hierconsole.study.replication.hashes import file_sha256, folder_sha256, text_sha256
from hierconsole.study.replication.stages import CUB, NABIRDS, StudyRun, run_plans

_T = TypeVar("_T")
_R = TypeVar("_R")

DEFAULT_SEED = 0
"""The random weights' seed unless told (only --weights none takes one)."""


def given_datasets(args: argparse.Namespace) -> frozenset[str]:
    return frozenset(d for d, given in ((CUB, args.cub), (NABIRDS, args.nabirds)) if given is not None)


def replication_inputs(args: argparse.Namespace) -> dict[str, str]:
    """Validate every input and hash it; nothing is created before this succeeds.

    Each input is read here by the reader of the stage that uses it (the extractor's model and weights
    rules, `import`'s dataset readers, `taxonomy build-cub`'s checklist and aliases readers), so an input a
    stage would refuse hours in is refused now, in one line."""
    if args.cub is None and args.nabirds is None:
        raise HierconsoleError(
            "replicate: give --cub DIR, --nabirds DIR or both (the datasets to replicate on)"
        )
    checked_executor(args.executor, args.ray_address)  # as `run` checks it, before the studies start
    _checked(check_seed, args.seed, option="--seed")
    if args.seed != DEFAULT_SEED and args.weights != RANDOM:
        # The seed names the replication: with real weights it would start a second one that retrains
        # everything to the same numbers.
        raise HierconsoleError(
            f"--seed {args.seed}: a seed only applies to --weights none (random weights); drop --seed, since "
            f"real weights are the same whatever the seed"
        )
    _check_out(args.out)
    # "paper_values" is the input's name in every stored stage key (the tables stage's), kept from before the
    # paper's tables became data files: renaming it would make every recorded tables stage stale.
    external = {"scale": args.scale, "seed": str(args.seed), "paper_values": PAPER_TABLES_DIGEST}
    if args.model in ARCHITECTURES:
        external["model"] = args.model
    else:
        # The extractor's own loader: a malformed or non-DINOv2 config is refused here, not in a child.
        _checked(architecture, args.model, option="--model")
        model = Path(args.model)
        external["model"] = file_sha256(model)
        args.model = str(model.resolve())
    for option, folder in (("--cub", args.cub), ("--nabirds", args.nabirds)):
        if folder is not None and (not (folder / "images").is_dir() or not (folder / "images.txt").is_file()):
            raise HierconsoleError(
                f"{option} {folder}: no images/ folder and images.txt in it; pass the dataset's root folder"
            )
    if args.cub is not None:
        source = args.checklist or args.cub_taxonomy
        if source is None:
            raise HierconsoleError(
                "replicate --cub needs CUB's taxonomy: --checklist CSV (a bird checklist to build it from) "
                "or --cub-taxonomy CSV (a ready Class,Genus,Family file)"
            )
        option = "--checklist" if args.checklist else "--cub-taxonomy"
        _check_file(option, source)
        if args.aliases is not None:
            if args.checklist is None:
                raise HierconsoleError("--aliases goes with --checklist (it names checklist entries)")
            _check_file("--aliases", args.aliases)
    elif args.checklist or args.cub_taxonomy or args.aliases:
        raise HierconsoleError("--checklist, --cub-taxonomy and --aliases are CUB's: give --cub DIR with them")
    if args.nabirds is not None and not (args.nabirds / "hierarchy.txt").is_file():
        raise HierconsoleError(f"--nabirds {args.nabirds}: no hierarchy.txt in it; pass the nabirds/ folder")
    if args.weights == RANDOM:
        external["weights"] = RANDOM
    elif not Path(args.weights).exists():
        raise HierconsoleError(f"--weights {args.weights}: no such file or folder; pass the weights, or none")
    else:
        _checked(weights_kind, Path(args.weights), option="--weights")  # the extractor's rule
    _check_datasets(args)
    # Every input is valid: hash them (the stages' keys).
    for key, folder in (("cub_images", args.cub), ("nabirds_images", args.nabirds)):
        if folder is not None:
            external[key] = folder_sha256(folder / "images")
    if args.cub is not None:
        labels = [args.cub / n for n in ("classes.txt", "image_class_labels.txt") if (args.cub / n).is_file()]
        aliases = file_sha256(args.aliases) if args.aliases is not None else ""
        external["cub_labels"] = text_sha256("".join(file_sha256(f) for f in labels))
        external["taxonomy_source"] = text_sha256(f"{option}:{file_sha256(source)}:{aliases}")
    if args.nabirds is not None:
        external["nabirds_hierarchy"] = file_sha256(args.nabirds / "hierarchy.txt")
    external.update(run_plans(args.scale, _preset_sha256))
    if args.weights != RANDOM:
        weights = Path(args.weights)
        external["weights"] = file_sha256(weights) if weights.is_file() else folder_sha256(weights)
    return external


def _checked(check: Callable[[_T], _R], value: _T, *, option: str) -> _R:
    """One of the stages' own checks (or readers) of an option's value; its refusal becomes one line naming
    the option."""
    try:
        return check(value)
    except InputError as exc:
        raise HierconsoleError(exc.one_line(option)) from None


def _check_file(option: str, path: Path) -> None:
    if path.is_dir():
        raise HierconsoleError(f"{option} {path}: is a folder, not a file; give the file itself")
    if not path.is_file():
        raise HierconsoleError(f"{option} {path}: no such file")


def _check_out(out: Path | None) -> None:
    """--out must be a folder, or a path one can be made at: the tables are written at the very end."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise HierconsoleError(f"--out {out}: is a file, not a folder; give a folder for the tables (made if absent)")
    for above in out.absolute().parents:
        if above.exists():
            if not above.is_dir():
                raise HierconsoleError(
                    f"--out {out}: {above} is a file, so no folder can be made under it; give a folder for the tables"
                )
            if not os.access(above, os.W_OK | os.X_OK) and not out.exists():
                raise HierconsoleError(
                    f"--out {out}: the folder {above} is not writable, so the tables cannot be written there; "
                    "give a folder you can write to"
                )
            break


def _check_datasets(args: argparse.Namespace) -> None:
    """Read each dataset folder's lists as `import` will (and CUB's taxonomy, checklist and aliases as
    `import cub` and `taxonomy build-cub` will): a stage never meets an input this lets through."""
    if args.cub is not None:
        if (args.cub / "hierarchy.txt").is_file():  # NABirds' layout: CUB's stages would read it wrong
            raise HierconsoleError(
                f"--cub {args.cub}: it holds hierarchy.txt, so it is a NABirds folder; pass it as --nabirds"
            )
        table = _checked(read_image_dir, args.cub, option="--cub")
        if args.cub_taxonomy is not None:
            _checked(lambda path: cub_taxonomy(table, path), args.cub_taxonomy, option="--cub-taxonomy")
        if args.checklist is not None:
            _checked(read_checklist, args.checklist, option="--checklist")
        if args.aliases is not None:
            _checked(read_aliases, args.aliases, option="--aliases")
    if args.nabirds is not None:
        _checked(read_nabirds_dir, args.nabirds, option="--nabirds")


def _preset_sha256(run: StudyRun) -> str:
    """The bytes a study run reads: its preset file, or its family file and that family's base preset."""
    if not run.family:
        return file_sha256(resolve_preset(run.preset))
    family = resolve_family(run.preset)
    return text_sha256(file_sha256(family) + file_sha256(resolve_preset(load_family(family).base)))
