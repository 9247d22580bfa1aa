"""Feature extraction on CPU: images/s and peak memory of `hierconsole extract`, ViT-S/14 and ViT-B/14.

    python benchmarks/extract.py [--images 64] [--models vits14,vitb14] [--batch-size 32] [--workers 1]
                                 [--modes hierconsole,naive,model-only,model-1thread]

Random weights (the speed does not depend on their values), a generated CUB-layout folder of JPEGs at
CUB's typical 500x375. Each configuration runs in a fresh process, which reports its wall time split
into start-up (imports, model build) and the extraction itself, the CPU seconds per image (its own and
its reaped decoding workers'), and its peak resident memory (the main process, and the largest decoding
worker). Rows: `hierconsole` is the real `run_extraction` (DataLoader workers, batches, shards);
`naive` is the plain loop a script would write (decode one image, run the model on it, next, in one
process); `model-only` times the model alone on a preprocessed batch (the floor for this batch size);
`model-1thread` the same on one thread, whose CPU seconds per image are the least sensitive to other
load on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_folder(base: Path, n: int) -> Path:
    import numpy as np
    from PIL import Image

    root = base / "CUB_200_2011"
    rng = np.random.default_rng(0)
    lines = []
    for k in range(1, n + 1):
        rel = f"{k % 10:03d}.Class/img_{k:05d}.jpg"
        path = root / "images" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        # smooth noise compresses like a photo rather than like white noise
        small = rng.integers(0, 256, size=(47, 63, 3), dtype=np.uint8)
        Image.fromarray(small).resize((500, 375), Image.Resampling.BICUBIC).save(path, quality=90)
        lines.append(f"{k} {rel}")
    (root / "images.txt").write_text("\n".join(lines) + "\n")
    return root


def cpu_seconds() -> float:
    """CPU time of this process and of its reaped children (the decoding workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def child(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    import numpy as np
    import torch

    from hierconsole.extraction.architectures import ARCHITECTURES
    from hierconsole.extraction.backbone import load_backbone
    from hierconsole.extraction.preprocess import DINOV2_EVAL, load_image
    from hierconsole.extraction.runner import Settings, run_extraction
    from hierconsole.extraction.sources import dataset_images
    from hierconsole.extraction.weights import weights_source

    arch = ARCHITECTURES[args.model]
    backbone = load_backbone(arch, weights_source("none", 0), arch)
    images = dataset_images("cub", args.root)
    started = time.perf_counter() - t0
    out = {"model": args.model, "mode": args.mode, "startup_s": started, "threads": torch.get_num_threads()}
    cpu0 = cpu_seconds()
    if args.mode == "hierconsole":
        settings = Settings(batch_size=args.batch_size, shard_size=args.batch_size * 4, workers=args.workers)
        t1 = time.perf_counter()
        run_extraction(images, backbone, DINOV2_EVAL, Path(args.out), settings)
        out["extract_s"] = time.perf_counter() - t1
    elif args.mode == "naive":
        t1 = time.perf_counter()
        feats = []
        with torch.inference_mode():
            for i in range(len(images)):
                x = torch.from_numpy(load_image(images.file(i)))[None]
                feats.append(backbone.model(pixel_values=x).pooler_output.numpy())
        np.savez(args.out, features=np.concatenate(feats), ids=np.array(images.ids))
        out["extract_s"] = time.perf_counter() - t1
    else:  # the model alone on a preprocessed batch; "model-1thread" on one thread, for its CPU cost
        if args.mode == "model-1thread":
            torch.set_num_threads(1)
            out["threads"] = 1
        x = torch.from_numpy(np.stack([load_image(images.file(i)) for i in range(args.batch_size)]))
        rounds = max(1, len(images) // args.batch_size)
        with torch.inference_mode():
            backbone.model(pixel_values=x[:2])  # warm-up
            t1, c1 = time.perf_counter(), cpu_seconds()
            for _ in range(rounds):
                backbone.model(pixel_values=x)
            per_image = 1 / (rounds * args.batch_size)
            out["cpu_s_per_image"] = (cpu_seconds() - c1) * per_image
        out["extract_s"] = (time.perf_counter() - t1) * per_image * len(images)
        t2 = time.perf_counter()
        for i in range(len(images)):
            load_image(images.file(i))
        out["decode_per_image_s"] = (time.perf_counter() - t2) / len(images)
    out["images_per_s"] = len(images) / out["extract_s"]
    if args.mode in ("hierconsole", "naive"):
        out["cpu_s_per_image"] = (cpu_seconds() - cpu0) / len(images)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["peak_rss_worker_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print("RESULT " + json.dumps(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--models", default="vits14,vitb14")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--modes", default="hierconsole,naive,model-only,model-1thread")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        root = make_folder(Path(tmp), args.images)
        print(
            f"{args.images} JPEGs 500x375, batch {args.batch_size}, {args.workers} decoding worker(s), "
            f"{os.cpu_count()} CPUs, random weights"
        )
        rows = []
        for model in args.models.split(","):
            for mode in args.modes.split(","):
                out = Path(tmp) / f"{model}-{mode}.npz"
                done = subprocess.run(
                    [sys.executable, __file__, "--child", "--model", model, "--mode", mode, "--root", str(root),
                     "--out", str(out), "--batch-size", str(args.batch_size), "--workers", str(args.workers)],
                    capture_output=True, text=True, env=env, check=True,
                )  # fmt: skip
                result = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))[7:])
                rows.append(result)
                extra = (
                    f", decode+preprocess {1000 * result['decode_per_image_s']:.1f} ms/image on one core"
                    if "decode_per_image_s" in result
                    else ""
                )
                cpu = (
                    f"{result['cpu_s_per_image']:5.2f} CPU-s/image"
                    if "cpu_s_per_image" in result
                    else " " * 16
                )
                print(
                    f"{model:7s} {mode:12s} {result['images_per_s']:6.2f} images/s {cpu}  load {os.getloadavg()[0]:4.1f}  "
                    f"start-up {result['startup_s']:5.1f} s  peak RSS {result['peak_rss_mib']:6.0f} MiB"
                    f" (largest worker {result['peak_rss_worker_mib']:.0f} MiB){extra}"
                )
        for model in args.models.split(","):
            ours = next((r for r in rows if r["model"] == model and r["mode"] == "hierconsole"), None)
            naive = next((r for r in rows if r["model"] == model and r["mode"] == "naive"), None)
            if ours and naive:
                print(f"{model}: hierconsole / naive = {ours['images_per_s'] / naive['images_per_s']:.2f}x")
            if ours:
                print(
                    f"{model}: CUB's 11,788 images would take {11788 / ours['images_per_s'] / 60:.0f} min here"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
