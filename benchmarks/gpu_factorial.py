"""The full CUB-sized factorial (3 seeds x 4 cells x 100 epochs = 12 runs) on a CUDA GPU, timed end to end.

    .venv/bin/python benchmarks/gpu_factorial.py                 # seeds one after another, in this process
    .venv/bin/python benchmarks/gpu_factorial.py --workers 3     # the 3 seed jobs as worker processes

Each job is the production one: hierconsole's batched trainer with checkpoints every epoch (atomic write,
fsync) and validation every 10 epochs on a train-internal split. Prints the device, seconds per epoch,
the whole factorial's wall time and the issue-7 target (under 30 s on an H200). Exits with status 2 and a
message when no CUDA device is available.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from factorial_setup import SEEDS, median, prepare_dataset, run_workers, write_job  # noqa: E402

from hierconsole.contract.events import to_line  # noqa: E402
from hierconsole.engine.trainer import FactorialTrainer  # noqa: E402

TARGET_SECONDS = 30.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=0, help="run the seed jobs as N worker processes")
    ap.add_argument("--checkpoint-every", type=int, default=1)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "gpu_factorial: no CUDA device is available (torch.cuda.is_available() is False); "
            "run this on a machine with an NVIDIA GPU and a CUDA build of torch.",
            file=sys.stderr,
        )
        return 2
    name = torch.cuda.get_device_name(0)
    print(
        f"# gpu_factorial  {time.strftime('%Y-%m-%d %H:%M')}  {name}, torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}"
    )
    with tempfile.TemporaryDirectory(prefix="hc-gpu-") as tmp:
        root = Path(tmp)
        fs, fs_dir = prepare_dataset("cub", root)
        # Warm-up: CUDA context, kernels and allocator, as a first job in a fresh process would pay once.
        warm = write_job(root / "warm", fs, fs_dir, seed=1, epochs=1, threads=1, device="cuda")
        FactorialTrainer(warm, lambda e: None).run()
        specs = [
            write_job(
                root / f"s{seed}",
                fs,
                fs_dir,
                seed=seed,
                epochs=args.epochs,
                threads=1,
                device="cuda",
                checkpoint_every=args.checkpoint_every,
            )
            for seed in SEEDS
        ]
        events: list[dict] = []
        t0 = time.perf_counter()
        if args.workers:
            run_workers(specs, args.workers)
            how = f"{args.workers} worker processes (each pays its own start-up and CUDA context)"
        else:
            for spec in specs:
                FactorialTrainer(spec, lambda e: events.append(json.loads(to_line(e)))).run()
            how = "one process, seeds in turn"
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        for spec in specs:
            log = Path(spec.out_dir) / "events.jsonl"
            if log.exists():  # worker processes log their events there
                events += [json.loads(line) for line in log.read_text().splitlines()]
        epoch_seconds = [e["seconds"] for e in events if e["kind"] == "epoch"]
    runs, epochs = 4 * len(SEEDS), args.epochs
    print(f"  {runs} runs x {epochs} epochs ({how}): {wall:.1f} s end to end")
    if epoch_seconds:
        print(f"  median epoch (four cells, training loop only): {median(epoch_seconds) * 1e3:.1f} ms")
    ok = wall < TARGET_SECONDS
    print(
        f"  [target: whole factorial under {TARGET_SECONDS:.0f} s on an H200: {'PASS' if ok else 'FAIL'} "
        f"on {name}]"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
