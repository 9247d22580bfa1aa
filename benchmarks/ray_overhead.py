"""What running jobs on Ray costs against local workers, on this machine.

    python benchmarks/ray_overhead.py [--skip-demo] [--jobs 4]

Real `hierconsole` processes on temporary homes, timed end to end:
- the demo study (`hierconsole demo`: 3 seeds x 30 epochs, then evaluation) on local workers, on a Ray
  instance the command starts for itself (`--executor ray`), and on a Ray instance that is already up
  (`--executor ray --ray-address HOST:PORT`, as a cluster would be);
- the overhead per job: a study of `--jobs` one-epoch seeds on the tiny data, local against an
  already-running Ray instance, as the mean of (finished_at - started_at) over its training jobs from the
  store (the time a job holds its place in the queue, from its launch to its end being recorded), and
  the whole command's wall time divided by the jobs.
The results of each Ray run are checked bit-identical to the local run's (final model hashes, metrics).
The machine may be shared: each demo variant runs `--repeat` times, interleaved, and the fastest counts;
the workers' own epoch times (from the store) separate a slower computation (Ray's processes taking CPU
from the workers) from the orchestration's overhead.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hierconsole.datasets import SyntheticConfig, make_synthetic
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store

TINY = SyntheticConfig(
    name="tiny", n_leaves=12, n_middles=6, n_highs=3, n_singleton_middles=2, n_train=260, n_test=160, dim=48
)
TINY_RUN = [
    "run", "demo", "--dataset", "tiny", "--epochs", "1",
    "--set", "training.hidden=32", "--set", "training.out_dim=8", "--set", "training.batch_size=32",
    "--set", "training.lr=1e-3", "--set", "evaluation.n_query=40", "--set", "compute.device='cpu'",
    "--set", "evaluation.baselines=[]",
]  # fmt: skip


def cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hierconsole", "--home", str(home), *args]


def timed(argv: list[str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return took


def results(home: Path) -> tuple[list, list]:
    with Store(home, read_only=True) as store:
        models = store.rows("SELECT seed, arm, final_sha256 FROM runs WHERE kind = 'final' ORDER BY ALL")
        metrics = store.rows(
            "SELECT seed, arm, perturbation, level, metric, value FROM metrics WHERE NOT posthoc ORDER BY ALL"
        )
    return models, metrics


def epoch_seconds(home: Path) -> float:
    """The mean wall time of one lockstep epoch, as the workers measured it."""
    with Store(home, read_only=True) as store:
        return float(store.value("SELECT avg(seconds) FROM epochs"))


def job_seconds(home: Path) -> float:
    with Store(home, read_only=True) as store:
        value = store.value(
            "SELECT avg(epoch(finished_at) - epoch(started_at)) FROM jobs WHERE kind = 'final'"
        )
    return float(value)


def tiny_home(root: Path, name: str) -> Path:
    home = root / name
    with Store(home) as store:
        register_dataset(store, make_synthetic(TINY))
    return home


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-demo", action="store_true", help="only the per-job overhead")
    parser.add_argument("--jobs", type=int, default=4, help="one-epoch seed jobs in the overhead study")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each demo variant (the fastest counts)")
    args = parser.parse_args()
    os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
    import ray

    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # An instance that is already up, as a cluster is: the command connects, it does not start one.
        # Three logical CPUs: as many jobs at once as the local run (the demo preset's 3).
        ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        address = ray.get_runtime_context().gcs_address
        try:
            if not args.skip_demo:
                variants = {
                    "local workers (3 at once)": [],
                    "Ray started by the command": ["--executor", "ray"],
                    "Ray already running": ["--executor", "ray", "--ray-address", address],
                }
                best: dict[str, tuple[float, Path]] = {}
                for attempt in range(args.repeat):
                    for i, (name, flags) in enumerate(variants.items()):
                        home = root / f"demo-{i}-{attempt}"
                        took = timed(cli(home, "demo", *flags))
                        if name not in best or took < best[name][0]:
                            best[name] = (took, home)
                local, local_home = best["local workers (3 at once)"]
                for name, (took, _home) in best.items():
                    rows.append((f"demo study, {name}", f"{took:.1f} s", f"{took / local:.2f}"))
                for name, (_, home) in best.items():
                    epoch = epoch_seconds(home)
                    rows.append((f"  its lockstep epoch ({name})", f"{epoch:.3f} s", f"{epoch / epoch_seconds(local_home):.2f}"))
                same = all(results(home) == results(local_home) for _, home in best.values())
                rows.append(("demo results bit-identical across the three", str(same), ""))
            seeds = ",".join(str(100 + i) for i in range(args.jobs))
            home_l, home_r = tiny_home(root, "tiny-local"), tiny_home(root, "tiny-ray")
            wall_l = timed(cli(home_l, *TINY_RUN, "--seeds", seeds, "--parallel", "1"))
            wall_r = timed(cli(home_r, *TINY_RUN, "--seeds", seeds, "--parallel", "1", "--executor", "ray",
                               "--ray-address", address))  # fmt: skip
            per_l, per_r = job_seconds(home_l), job_seconds(home_r)
            rows.append((f"one-epoch tiny job, local (mean of {args.jobs})", f"{per_l:.2f} s", "1.00"))
            rows.append((f"one-epoch tiny job, Ray (mean of {args.jobs})", f"{per_r:.2f} s", f"{per_r / per_l:.2f}"))
            rows.append(("overhead per job on Ray (job time)", f"{per_r - per_l:+.2f} s", ""))
            rows.append((f"tiny study wall, local ({args.jobs} jobs + evaluate, 1 at once)", f"{wall_l:.1f} s", "1.00"))
            rows.append(("tiny study wall, Ray", f"{wall_r:.1f} s", f"{wall_r / wall_l:.2f}"))
            rows.append(("overhead per job on Ray (wall / jobs)", f"{(wall_r - wall_l) / (args.jobs + 1):+.2f} s", ""))
            rows.append(("tiny results bit-identical", str(results(home_l) == results(home_r)), ""))
        finally:
            ray.shutdown()
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>10}  {'vs local':>8}")
    for what, value, ratio in rows:
        print(f"{what:<{width}}  {value:>10}  {ratio:>8}")
    print(f"({os.cpu_count()} CPU cores, ray {ray.__version__}, CPU only)")


if __name__ == "__main__":
    main()
