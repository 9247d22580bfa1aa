"""`hierconsole extract cub|nabirds|folder ...`: frozen DINOv2 features of a folder of images.

Everything the user gave is checked before torch is imported or a file is written (folder, index files,
output path, weights); `hierconsole.extraction.runner` and its torch and `transformers` are imported only
when the extraction starts, so building the parser stays light.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from hierconsole.cli.arguments import positive_int
from hierconsole.cli.output import output_console
from hierconsole.errors import InputError
from hierconsole.extraction.architectures import ARCHITECTURES, DEFAULT_MODEL, architecture
from hierconsole.extraction.preprocess import DINOV2_EVAL, MAX_PIXELS
from hierconsole.extraction.shards import manifest_path
from hierconsole.extraction.sources import (
    ImageList,
    check_inside,
    dataset_images,
    folder_images,
    missing_files_error,
)
from hierconsole.extraction.weights import weights_source
from hierconsole.plurals import counted
from hierconsole.present.json_output import json_text

EXTRA = ("transformers", "PIL")
DEFAULT_WORKERS = min(8, max(1, (os.cpu_count() or 2) - 1))
_SHOWN = 20


def _workers(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more worker processes, got {value!r}")
    return n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "extract",
        help="frozen DINOv2 features of a CUB, NABirds or any image folder (needs the 'extract' extra)",
        description=(
            "Run a frozen DINOv2 backbone (Hugging Face transformers) over the images a dataset's own index "
            "lists and write an .npz of features and ids that `hierconsole import` reads, with a manifest. "
            "Preprocessing: shorter side 256 (bicubic), center crop 224, ImageNet mean/std. Interrupted runs "
            "resume from OUT.parts/. Nothing is downloaded: pass local weights, or --weights none --seed S."
        ),
    )
    kinds = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    c = kinds.add_parser("cub", help="a CUB_200_2011/ folder (images.txt, images/)")
    c.add_argument("root", type=Path)
    n = kinds.add_parser("nabirds", help="a nabirds/ folder (images.txt, images/)")
    n.add_argument("root", type=Path)
    f = kinds.add_parser("folder", help="any folder of images, keyed by --list ids or by relative path")
    f.add_argument("root", type=Path)
    f.add_argument(
        "--list",
        type=Path,
        help="CSV with columns id,path (relative to the folder); default: every image file",
    )
    for q in (c, n, f):
        q.add_argument("-o", "--output", type=Path, required=True, help="features file to write (.npz)")
        q.add_argument(
            "--weights",
            required=True,
            help="a local Hugging Face DINOv2 folder, a .safetensors file, a .pth state dict, or 'none' "
            "(random weights; needs --seed)",
        )
        q.add_argument("--seed", type=int, help="seed of the random weights (--weights none only)")
        q.add_argument(
            "--model",
            help=f"{', '.join(ARCHITECTURES)} (default {DEFAULT_MODEL}, or what a weights folder's config.json "
            "says), or a .json of Dinov2Config fields",
        )
        q.add_argument("--batch-size", type=positive_int, default=64)
        q.add_argument("--shard-size", type=positive_int, default=1024, help="images per resumable shard")
        q.add_argument(
            "--workers",
            type=_workers,
            default=DEFAULT_WORKERS,
            help=f"image-decoding processes (0: in this one; default {DEFAULT_WORKERS}: the CPUs less one, at most 8)",
        )
        q.add_argument(
            "--device", default="auto", help="auto (a GPU when there is one), cpu, cuda, cuda:1, ..."
        )
        q.add_argument(
            "--no-amp", action="store_true", help="full float32 on a GPU (default: bfloat16 autocast)"
        )
        q.add_argument(
            "--on-error",
            choices=("continue", "stop"),
            default="continue",
            help="an unreadable image: list it and go on (default), or stop at it",
        )
        q.add_argument(
            "--stop-after",
            type=positive_int,
            metavar="N",
            help="stop once N more images are done (at a shard boundary); rerun to continue",
        )
        q.add_argument("--overwrite", action="store_true", help="replace an existing output file")
        q.add_argument(
            "--max-pixels",
            type=positive_int,
            default=MAX_PIXELS,
            metavar="N",
            help=f"an image whose header claims more pixels is listed as unreadable and skipped (default {MAX_PIXELS:,})",
        )
        q.add_argument(
            "--allow-outside-paths",
            action="store_true",
            help="read listed paths that are absolute or climb out of the image folder (refused by default)",
        )
        q.add_argument(
            "--progress",
            choices=("bar", "json"),
            default="bar",
            help="bar: a progress bar on stderr (default); json: one line {\"schema\": V, \"done\": N, \"total\": M} per "
            "update on stdout, for programs that follow an extraction (the console does)",
        )
        q.set_defaults(func=_extract)


def _images(args: argparse.Namespace) -> ImageList:
    images = folder_images(args.root, args.list) if args.source == "folder" else dataset_images(args.source, args.root)
    if not args.allow_outside_paths:
        check_inside(images)
    return images


def _check_output(args: argparse.Namespace) -> Path:
    out: Path = args.output
    if out.suffix.lower() != ".npz":
        raise InputError(out, "the output must be an .npz file", hint="e.g. -o cub_dinov2.npz")
    if not out.parent.is_dir():
        raise InputError(out, f"the folder {out.parent} does not exist", hint="create it first")
    if out.exists() and not args.overwrite:
        raise InputError(out, "the file exists", hint="pass --overwrite to replace it, or choose another -o")
    return out


def _check_extra() -> None:
    lacking = [m for m in EXTRA if importlib.util.find_spec(m) is None]
    if lacking:
        raise InputError(
            "extract",
            f"feature extraction needs {', '.join('Pillow' if m == 'PIL' else m for m in lacking)}, "
            "which is not installed",
            hint="pip install 'hierconsole[extract]' (transformers and pillow)",
        )


def _extract(args: argparse.Namespace) -> int:
    images = _images(args)
    out = _check_output(args)
    arch = architecture(args.model) if args.model else None
    if args.batch_size > args.shard_size or args.shard_size % args.batch_size:
        raise InputError(
            "--shard-size",
            f"{args.shard_size} is not a multiple of --batch-size {args.batch_size}",
            hint="shards hold whole batches, so resumed runs batch exactly like uninterrupted ones",
        )
    missing = images.missing()
    if missing and args.on_error == "stop":
        raise missing_files_error(images, missing)
    source = weights_source(args.weights, args.seed)
    _check_extra()

    from hierconsole.extraction.backbone import load_backbone
    from hierconsole.extraction.runner import Settings, run_extraction

    device = args.device
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except RuntimeError as exc:
        raise InputError(
            "--device", f"{device!r} is not a device: {exc}", hint="use cpu, cuda or cuda:N"
        ) from exc
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device", f"{device!r} asked for, but torch sees no GPU", hint="use --device cpu")
    backbone = load_backbone(arch, source, ARCHITECTURES[DEFAULT_MODEL])
    settings = Settings(
        batch_size=args.batch_size,
        shard_size=args.shard_size,
        workers=args.workers,
        device=device,
        amp=torch.device(device).type == "cuda" and not args.no_amp,
        on_error=args.on_error,
        stop_after=args.stop_after,
        max_pixels=args.max_pixels,
    )
    console = output_console()
    err = Console(stderr=True, highlight=False)
    weights_note = escape(source.describe())
    if source.kind == "random":
        weights_note = f"[bold yellow]{weights_note}[/]"
    console.print(
        f"extracting {counted(len(images), 'image')} ({images.listing} of {escape(str(images.root))}) with "
        f"{backbone.arch.describe()}, {weights_note}, on {device}"
    )
    if args.progress == "json":
        return _report(console, args, out, backbone, images, _run_reporting_json(images, backbone, out, settings))
    with Progress(
        TextColumn("extract"),
        BarColumn(),
        MofNCompleteColumn(),
        _Rate(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as bar:
        task: list = []

        def progress(done: int, total: int) -> None:
            if not task:  # started at what earlier runs did, so the rate counts this run only
                task.append(bar.add_task("extract", total=total, completed=done))
            else:
                bar.update(task[0], completed=done)

        try:
            outcome = run_extraction(images, backbone, DINOV2_EVAL, out, settings, progress=progress)
        except KeyboardInterrupt:
            err.print(f"finished shards are kept in {out.name}.parts/: rerun the same command to resume")
            raise
    return _report(console, args, out, backbone, images, outcome)


def _run_reporting_json(images: ImageList, backbone, out: Path, settings) -> Any:  # noqa: ANN001
    from hierconsole.extraction.runner import run_extraction

    def progress(done: int, total: int) -> None:
        sys.stdout.write(json_text({"done": done, "total": total}, indent=None))
        sys.stdout.flush()

    return run_extraction(images, backbone, DINOV2_EVAL, out, settings, progress=progress)


def _report(console: Console, args: argparse.Namespace, out: Path, backbone, images: ImageList, outcome) -> int:  # noqa: ANN001
    """What an extraction did: resumed shards, where the features are, which images failed."""
    if outcome.resumed_shards:
        console.print(f"resumed: {counted(outcome.resumed_shards, 'finished shard')} kept from an earlier run")
    if not outcome.finished:
        console.print(
            f"[yellow]stopped[/] after --stop-after {args.stop_after}; finished shards are in "
            f"{out.name}.parts/. Rerun the same command to continue."
        )
        return 0
    console.print(
        f"[green]wrote[/] {out}: {outcome.n_features:,} x {backbone.dim} features keyed by {images.listing} ids; "
        f"manifest {manifest_path(out).name}"
    )
    if outcome.failed:
        console.print(f"[bold red]{counted(len(outcome.failed), 'image')} could not be read[/] and have no features:")
        for item in outcome.failed[:_SHOWN]:
            console.print(f"  {escape(item['path'])} (id {escape(item['id'])}): {escape(item['reason'])}")
        if len(outcome.failed) > _SHOWN:
            console.print(f"  ... and {len(outcome.failed) - _SHOWN:,} more (all listed in the manifest)")
    return 0


class _Rate(ProgressColumn):
    """Images per second over this run."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        # Nothing until the first images are through: a placeholder read as a rate of nothing per second.
        return Text(f"{speed:,.1f} img/s" if speed else "")
