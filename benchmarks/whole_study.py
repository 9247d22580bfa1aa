"""A whole study end to end: the naive researcher loop against `hierconsole run`, with a breakdown.

    .venv/bin/python benchmarks/whole_study.py                  # CUB-sized, 50 epochs, and the demo (~5 min)
    .venv/bin/python benchmarks/whole_study.py --epochs 100     # the 100-epoch figures (~8 min)

hierconsole: `hierconsole run cub --dataset synthetic:cub-sized --epochs N` (3 seeds x 4 cells, three
1-thread workers, the evaluate job, audits) and `hierconsole demo`, each in a fresh home and a fresh
orchestrator process. That process times its own ingestion (``apply_events``) and audits
(``run_audits``) by wrapping them, and records when it launched each job; the jobs' event logs give the
rest. Breakdown of the wall time:

- start-up: the orchestrator's own (interpreter, imports, dataset registration, study creation: until
  its first launch) plus the final jobs' worker start-up (launch to the worker's ``start`` event, the
  longest of the parallel jobs) plus the evaluate job's;
- training: the final jobs from their ``start`` event to their last event (the latest of them), i.e.
  epochs, validation and checkpoints;
- evaluation: the evaluate job from its ``start`` event to its ``done`` event;
- audits and ingestion: the orchestrator's measured time inside them (ingestion overlaps the jobs);
- other: what remains besides ingestion (polling intervals, the summary, teardown).

The naive loop (as a researcher writes it; one process, torch at --naive-threads threads: 2 is its faster
count on a quiet 2-core machine, 1 on a shared one, where two OpenMP threads stall): the
same start-up a script pays (import torch, geoopt, sklearn), training (``train_factorial.NaiveRun``:
one cell at a time, DataLoader, eager, geoopt), and the naive per-query evaluation
(``retrieval.naive_unit``: geoopt distances, sklearn AP per level, argsort for R@K); training and
evaluation are timed on a slice (--naive-epochs epochs of one seed's cells, --naive-queries queries of a
Poincaré unit) and scaled to the whole study, as in the issue's own figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable


def child(home: str, argv: list[str], out: str) -> int:
    """The orchestrator process, timing its ingestion and audits and recording each job's launch."""
    t_start = time.time()
    import hierconsole.study.run.lifecycle as lifecycle
    import hierconsole.study.run.orchestrator as orchestrator
    from hierconsole.cli import main

    spent = {"ingestion": 0.0, "audits": 0.0}
    launched: dict[str, float] = {}

    def timed(name, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0

        return wrapper

    orchestrator.apply_events = timed("ingestion", orchestrator.apply_events)
    if hasattr(orchestrator, "apply_batch"):  # a tick's lines of every running job in one write
        orchestrator.apply_batch = timed("ingestion", orchestrator.apply_batch)
    lifecycle.run_audits = timed("audits", lifecycle.run_audits)
    launch = orchestrator.Orchestrator.launch

    def recording_launch(self, job_id: str) -> None:
        launched[job_id] = time.time()
        launch(self, job_id)

    orchestrator.Orchestrator.launch = recording_launch
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            code = main(["--home", home, *argv])
        finally:
            sys.stdout = stdout
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process and its threads, not the workers
    record = {
        "code": code,
        "t_start": t_start,
        "t_end": time.time(),
        "spent": spent,
        "launched": launched,
        "orchestrator_cpu": usage.ru_utime + usage.ru_stime,
    }
    Path(out).write_text(json.dumps(record))
    return 0


def breakdown(home: Path, record: dict, t0: float) -> dict[str, float]:
    """Wall-time breakdown of one study from the orchestrator's record and the jobs' event logs."""
    wall = record["t_end"] - t0
    from hierconsole.locations import job_dir

    launched = record["launched"]
    jobs = {
        j: [json.loads(line) for line in (job_dir(home, j) / "events.jsonl").read_text().splitlines() if line]
        for j in launched
    }
    finals = [j for j in jobs if "/final" in j]
    scoring = [j for j in jobs if j.endswith("/evaluate")]
    start_ts = {j: next(e["ts"] for e in ev if e["kind"] == "start") for j, ev in jobs.items()}
    first_launch = min(launched.values())
    worker_startup = max(start_ts[j] - launched[j] for j in finals) + sum(
        start_ts[j] - launched[j] for j in scoring
    )
    training = max(jobs[j][-1]["ts"] for j in finals) - min(start_ts[j] for j in finals)
    evaluation = sum(jobs[j][-1]["ts"] - start_ts[j] for j in scoring)
    out = {
        "start-up": (first_launch - t0) + worker_startup,
        "training": training,
        "evaluation": evaluation,
        "audits": record["spent"]["audits"],
        "ingestion": record["spent"]["ingestion"],
    }
    # Ingestion runs in the orchestrator while the workers train (it competes with them for the cores but
    # is not on the wall clock's critical path by itself), so "other" leaves it out.
    out["other"] = wall - sum(v for k, v in out.items() if k != "ingestion")
    out["wall"] = wall
    # CPU the orchestrator took from the cores the workers train on (ingestion, progress reads, the live
    # snapshot, its imports): a figure that, unlike the wall times, barely moves with the machine's load.
    out["orchestrator CPU"] = record["orchestrator_cpu"]
    return out


def hierconsole_study(argv: list[str], tmp: Path, name: str, setup: list[str] | None = None) -> dict[str, float]:
    home = tmp / name
    env = dict(os.environ)
    if setup:
        subprocess.run([PY, "-m", "hierconsole", "--home", str(home), *setup], check=True, capture_output=True, env=env)
    out = tmp / f"{name}.json"
    t0 = time.time()
    subprocess.run(
        [PY, __file__, "--child", str(home), str(out), "--", *argv], check=True, env=env, capture_output=True
    )
    record = json.loads(out.read_text())
    if record["code"] != 0:
        raise RuntimeError(f"hierconsole {' '.join(argv)} exited {record['code']}")
    return breakdown(home, record, t0)


def naive_loop(epochs: int, naive_epochs: int, naive_queries: int, threads: int) -> dict[str, float]:
    """The naive loop's start-up (measured), training and evaluation (measured on a slice, scaled)."""
    t0 = time.perf_counter()
    subprocess.run([PY, "-c", "import torch, geoopt, sklearn.metrics"], check=True)
    startup = time.perf_counter() - t0
    sys.path.insert(0, str(HERE))
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    from factorial_setup import SEEDS, cells, hyper
    from retrieval import N_QUERY, QG_SEEDS, models, naive_unit
    from train_factorial import NaiveRun

    from hierconsole.datasets import CUB_SIZED_CONFIG, make_synthetic, qg_perturbation

    fs = make_synthetic(CUB_SIZED_CONFIG)
    h = hyper(epochs)
    train = np.flatnonzero(fs.split == 0)
    x, y = torch.from_numpy(fs.features[train]), torch.from_numpy(fs.labels[train])
    runs = [NaiveRun(c, x, y, h, SEEDS[0]) for c in cells()]
    for r in runs:
        r.epoch()  # warm-up
    t0 = time.perf_counter()
    for _ in range(naive_epochs):
        for r in runs:
            r.epoch()
    per_seed_epoch = (time.perf_counter() - t0) / naive_epochs
    test = np.flatnonzero(fs.split == 2)
    geometry, z = models(fs.features[test], n=2)[1]
    parts = qg_perturbation(fs.labels, test, n_query=N_QUERY, seed=QG_SEEDS[0]).parts
    q, g = np.searchsorted(test, parts["query"]), np.searchsorted(test, parts["gallery"])
    lq, lg = fs.labels[parts["query"]], fs.labels[parts["gallery"]]
    naive_unit(geometry, z[q][:5], z[g], lq[:5], lg)  # warm-up
    t0 = time.perf_counter()
    naive_unit(geometry, z[q][:naive_queries], z[g], lq[:naive_queries], lg)
    per_query = (time.perf_counter() - t0) / naive_queries
    units = len(SEEDS) * 4 * len(QG_SEEDS)
    out = {
        "start-up": startup,
        "training": per_seed_epoch * epochs * len(SEEDS),
        "evaluation": per_query * N_QUERY * units,
        "audits": 0.0,
        "ingestion": 0.0,
        "other": 0.0,
    }
    out["wall"] = sum(out.values())
    out["orchestrator CPU"] = 0.0
    return out


def table(columns: dict[str, dict[str, float]]) -> str:
    rows = ("start-up", "training", "evaluation", "audits", "ingestion", "other", "wall", "orchestrator CPU")
    label = {"ingestion": "ingestion (concurrent with the jobs)"}
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for r in rows:
        lines.append(f"| {label.get(r, r)} | " + " | ".join(f"{c[r]:.1f} s" for c in columns.values()) + " |")
    return "\n".join(lines)


def cub_run(args: argparse.Namespace, tmp: Path) -> None:
    ours = hierconsole_study(
        ["run", "cub", "--dataset", "synthetic:cub-sized", "--epochs", str(args.epochs)],
        tmp,
        "cub",
        setup=["import", "synthetic", "cub-sized"],
    )
    columns = {f"hierconsole run cub, {args.epochs} epochs": ours}
    if not args.skip_naive:
        naive = naive_loop(args.epochs, args.naive_epochs, args.naive_queries, args.naive_threads)
        columns[f"naive loop, {args.epochs} epochs"] = naive
    print(f"\n## CUB-sized (5,994 train x 768), 3 seeds x 4 cells, {args.epochs} epochs\n")
    print(table(columns))
    overhead = sum(ours[k] for k in ("start-up", "evaluation", "audits", "ingestion"))
    print(f"\nnon-training overhead of hierconsole: {overhead:.1f} s = {overhead / ours['wall']:.0%} of its wall")
    if not args.skip_naive:
        print(f"naive training alone / hierconsole end to end: {naive['training'] / ours['wall']:.2f}x")
        print(f"naive whole loop / hierconsole end to end: {naive['wall'] / ours['wall']:.2f}x")
        print(f"naive evaluation / hierconsole evaluation: {naive['evaluation'] / ours['evaluation']:.1f}x")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child(argv[1], argv[4:], argv[2])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--naive-epochs", type=int, default=2, help="naive epochs (of one seed's four cells) timed")
    ap.add_argument("--naive-queries", type=int, default=60, help="naive per-query evaluations timed")
    ap.add_argument("--naive-threads", type=int, default=1)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--skip-cub", action="store_true")
    ap.add_argument("--skip-demo", action="store_true")
    args = ap.parse_args(argv)
    print(
        f"# whole study  {time.strftime('%Y-%m-%d %H:%M')}  {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load avg {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if not args.skip_cub:
            cub_run(args, tmp)
        if not args.skip_demo:
            demo = hierconsole_study(["demo"], tmp, "demo")
            print("\n## `hierconsole demo` (the README's first study)\n")
            print(table({"hierconsole demo": demo}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
