"""The full CUB-sized factorial (3 seeds x 4 cells x 100 epochs = 12 runs) end to end on one device, timed.

    python benchmarks/gpu_factorial.py --out OUT                          # CUDA: the issue-17 figure
    python benchmarks/gpu_factorial.py --device cpu --dataset demo --epochs 3 --cpu-epochs 0 --out OUT

End to end means what a study does after its splits exist: training every seed's final job (the
production trainer: checkpoints every epoch with fsync, validation every 10 epochs on a train-internal
split), the evaluation of the 12 final models on the 3 official-test query/gallery perturbations
(the production evaluator: strict metrics, the Poincare norm check), and the engine-side audit evidence
(every cell of a seed starts from the same state and sees the same batches, the update budget, the
final models reload exactly, Poincare embeddings inside the ball). The store's audits themselves need
DuckDB, which a GPU machine that takes only carried wheels does not have; they read exactly this
evidence from the events.

Training runs stacked (`--mode stacked`, the default: the three seeds' final jobs in this one process as
one computation, engine.stacked) or per seed (`--mode per-seed`: the three jobs one after the other in
this process, each its own batched engine). A warm-up job of one epoch pays the CUDA context and kernel
loading first, as the first job of a worker process would; it is reported, not counted.

Besides the wall time it reports two ratios: to the same code on CPU (`--cpu-epochs` epochs of the same
stacked training on CPU, extrapolated per epoch to the budget, plus the CPU evaluation measured whole;
skipped with 0 or when the device is the CPU) and to the GEMM-only time (every matrix product of the
training steps at their real shapes, on the device, nothing else: the floor). The results go to
OUT/gpu_factorial.json and OUT/gpu_factorial.md; the JSON's "fingerprint" hashes every final model and
every test metric, so two runs of the same configuration can be compared for bitwise identity.
Exit status 2, with a message, when CUDA is asked for and absent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from factorial_setup import CONFIGS, SEEDS, TAU, median  # noqa: E402

from hierconsole.config import load_preset  # noqa: E402
from hierconsole.contract import layout  # noqa: E402
from hierconsole.contract.events import to_line  # noqa: E402
from hierconsole.contract.jobspec import CellSpec, JobSpec, ModelRef, TestSplit  # noqa: E402
from hierconsole.datasets import FeatureSet, make_synthetic, qg_perturbations  # noqa: E402
from hierconsole.engine.checkpoints import load_payload  # noqa: E402
from hierconsole.engine.determinism import configure_device  # noqa: E402
from hierconsole.engine.evaluator import run_evaluation  # noqa: E402
from hierconsole.engine.stacked import StackedTrainer  # noqa: E402
from hierconsole.engine.trainer import FactorialTrainer, resolve_device  # noqa: E402
from hierconsole.vocabulary import ARMS, POINCARE, JobKind  # noqa: E402

TARGET_SECONDS = 30.0
RELOAD_TOLERANCE = 0.0  # a reloaded final model embeds bit for bit as the trained one


# -- the study's inputs ---------------------------------------------------------------------------------
def preset_for(epochs: int, device: str, threads: int, seeds: tuple[int, ...]):
    """The CUB preset (the protocol's optimiser, batch, clip, dropout, Poincare operating point)."""
    return load_preset("cub").with_overrides(
        epochs=epochs,
        seeds=list(seeds),
        device=device,
        values={"compute.threads_per_worker": threads, "training.val_every": 10},
    )


def prepare(root: Path, dataset: str) -> tuple[FeatureSet, Path, dict[str, Path]]:
    """The data and the study's split files: final training, train-internal validation, 3 Q/G draws."""
    fs = make_synthetic(CONFIGS[dataset])
    data = root / f"data-{dataset}"
    fs.save(data)
    splits = root / "splits"
    splits.mkdir()
    train = np.flatnonzero(fs.split == 0)
    np.savez(splits / "final_train.npz", fit=train)
    pool = np.random.default_rng(0).permutation(train)
    n_query = max(20, len(train) // 30)
    np.savez(splits / "val.npz", query=np.sort(pool[:n_query]), gallery=np.sort(pool[n_query : 6 * n_query]))
    test = np.flatnonzero(fs.split == 2)
    n_test_query = min(load_preset("cub").evaluation.n_query, len(test) // 5)
    files = {"train": splits / "final_train.npz", "val": splits / "val.npz"}
    for split in qg_perturbations(fs.labels, test, n_query=n_test_query):
        seed = split.params["seed"]
        np.savez(splits / f"qg-{seed}.npz", **split.parts)
        files[f"qg:{seed}"] = splits / f"qg-{seed}.npz"
    return fs, data, files


def final_specs(root: Path, fs: FeatureSet, data: Path, files: dict[str, Path], preset, name: str) -> list[JobSpec]:
    cells = tuple(CellSpec.of(arm, TAU) for arm in ARMS)
    specs = []
    for seed in preset.training.seeds:
        spec = JobSpec(
            job_id=f"{name}/final-s{seed}",
            study_id=name,
            kind=JobKind.FINAL,
            seed=seed,
            preset=preset,
            dataset_dir=str(data),
            dataset_sha256=fs.sha256(),
            out_dir=str(root / name / f"final-s{seed}"),
            cells=cells,
            train_split=str(files["train"]),
            val_split=str(files["val"]),
        )
        spec.write(Path(spec.out_dir) / layout.SPEC)
        specs.append(spec)
    return specs


def evaluate_spec(root: Path, fs: FeatureSet, data: Path, files: dict[str, Path], finals: list[JobSpec]) -> JobSpec:
    first = finals[0]
    models = tuple(
        ModelRef(f"{s.job_id}/{c.key}", s.seed, c, str(Path(s.out_dir) / layout.final_model(c)))
        for s in finals
        for c in s.cells
    )
    return JobSpec(
        job_id=f"{first.study_id}/evaluate",
        study_id=first.study_id,
        kind=JobKind.EVALUATE,
        seed=0,
        preset=first.preset,
        dataset_dir=str(data),
        dataset_sha256=fs.sha256(),
        out_dir=str(root / first.study_id / "evaluate"),
        test_splits=tuple(TestSplit(int(k.split(":")[1]), str(p)) for k, p in files.items() if k.startswith("qg:")),
        models=models,
    )


# -- the runs -------------------------------------------------------------------------------------------
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(specs: list[JobSpec], mode: str, sinks: dict[str, list]) -> None:
    def sink(spec: JobSpec):
        return lambda e: sinks[spec.job_id].append(json.loads(to_line(e)))

    if mode == "stacked":
        StackedTrainer(specs, [sink(s) for s in specs]).run()
    else:
        for spec in specs:
            FactorialTrainer(spec, sink(spec)).run()


def factorial(root: Path, fs, data, files, preset, mode: str, name: str, device: torch.device) -> dict:
    """Train, evaluate and audit one factorial; wall seconds of each phase and the evidence."""
    specs = final_specs(root, fs, data, files, preset, name)
    sinks: dict[str, list] = {s.job_id: [] for s in specs}
    sync(device)
    t0 = time.perf_counter()
    train(specs, mode, sinks)
    sync(device)
    t1 = time.perf_counter()
    ev_spec = evaluate_spec(root, fs, data, files, specs)
    ev_events: list[dict] = []
    run_evaluation(ev_spec, lambda e: ev_events.append(json.loads(to_line(e))))
    sync(device)
    t2 = time.perf_counter()
    audit = engine_audits(specs, sinks, ev_events, preset)
    t3 = time.perf_counter()
    epochs = [e["seconds"] for events in sinks.values() for e in events if e["kind"] == "epoch"]
    return {
        "train_s": t1 - t0,
        "evaluate_s": t2 - t1,
        "audit_s": t3 - t2,
        "total_s": t3 - t0,
        "median_epoch_s": median(epochs) if epochs else None,
        "audits": audit,
        "fingerprint": fingerprint(specs, ev_events),
        "metrics": {
            f"{e['run_id'].split('/', 1)[1]}@qg{e['perturbation']}": e["metrics"]
            for e in ev_events
            if e["kind"] == "metrics"
        },
    }


def engine_audits(specs: list[JobSpec], sinks: dict[str, list], ev_events: list[dict], preset) -> dict:
    """The evidence the store's audits check, from the events (no store here): name -> (ok, detail)."""
    out: dict[str, tuple[bool, str]] = {}
    n_train = len(np.load(specs[0].train_split)["fit"])
    bs = preset.training.batch_size
    steps = (n_train // bs if preset.training.drop_last else -(-n_train // bs)) * preset.training.epochs
    same_init, same_batches, budget, reload = [], [], [], []
    for spec in specs:
        events = sinks[spec.job_id]
        inits = {e["init_sha256"] for e in events if e["kind"] == "init"}
        same_init.append(len(inits) == 1)
        by_epoch: dict[int, set] = {}
        for e in events:
            if e["kind"] == "epoch":
                by_epoch.setdefault(e["epoch"], set()).add(e["batch_sha256"])
        same_batches.append(all(len(h) == 1 for h in by_epoch.values()) and len(by_epoch) == preset.training.epochs)
        finals = [e for e in events if e["kind"] == "final"]
        budget.append(all(e["updates"] == steps for e in finals) and len(finals) == len(spec.cells))
        reload.append(max(e["reload_max_diff"] for e in finals) <= RELOAD_TOLERANCE)
    out["same_init"] = (all(same_init), "every cell of a seed starts from one trainable state")
    out["batch_order"] = (all(same_batches), "every cell of a seed sees the same batches in every epoch")
    out["update_budget"] = (all(budget), f"{steps} updates per cell")
    out["reload"] = (all(reload), "final models reload and embed bit for bit")
    norms = [e for e in ev_events if e["kind"] == "norms"]
    out["ball"] = (
        all(e["max_norm"] <= e["bound"] + 1e-6 for e in norms) and len(norms) == 3 * sum(c.geometry == POINCARE for c in specs[0].cells),
        f"max Poincare test norm {max((e['max_norm'] for e in norms), default=float('nan')):.6f} "
        f"<= bound {max((e['bound'] for e in norms), default=float('nan')):.6f}",
    )
    n_metrics = sum(e["kind"] == "metrics" for e in ev_events)
    expected = len(specs) * len(specs[0].cells) * len(preset.evaluation.qg_seeds)
    out["evaluated"] = (n_metrics == expected, f"{n_metrics} of {expected} (model x perturbation) results")
    return {k: {"ok": ok, "detail": d} for k, (ok, d) in out.items()}


def fingerprint(specs: list[JobSpec], ev_events: list[dict]) -> str:
    """sha256 over every final model's tensors and every test metric: equal iff the runs are identical."""
    h = hashlib.sha256()
    for spec in specs:
        for cell in spec.cells:
            state = load_payload(Path(spec.out_dir) / layout.final_model(cell))["model"]
            for key in sorted(state):
                h.update(key.encode())
                h.update(state[key].cpu().contiguous().numpy().tobytes())
    for e in sorted((e for e in ev_events if e["kind"] == "metrics"), key=lambda e: (e["run_id"], e["perturbation"])):
        h.update(json.dumps([e["run_id"], e["perturbation"], e["metrics"]], sort_keys=True).encode())
    return h.hexdigest()


# -- the floors and references ----------------------------------------------------------------------------
class GemmOnly:
    """Every matrix product of a stacked training step at its real shapes, and nothing else."""

    def __init__(self, device: torch.device, groups: int, in_dim: int, preset, n_cells: int = 4):
        t = preset.training
        b, d, hid, o, c = t.batch_size, in_dim, t.hidden, t.out_dim, n_cells
        k = groups * c
        g = torch.Generator().manual_seed(0)

        def r(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=g).to(device)

        self.groups = groups
        self.x, self.w1, self.g1 = r(groups, b, d), r(groups, c * hid, d), r(groups, b, c * hid)
        self.a, self.w2, self.g2 = r(k, b, hid), r(k, o, hid), r(k, b, o)
        self.left, self.right, self.gd, self.z = r(k, b, o + 2), r(k, b, o + 2), r(k, b, b), r(k, b, o)
        self.flops = 2 * (2 * groups * b * d * c * hid + 3 * k * b * hid * o + k * b * b * (o + 2) + k * b * b * o)

    def steps(self, n: int) -> None:
        for _ in range(n):
            for s in range(self.groups):  # the first layer runs per seed, as in the stacked engine
                F.linear(self.x[s], self.w1[s])
                self.g1[s].t() @ self.x[s]
            torch.bmm(self.a, self.w2.transpose(1, 2))
            torch.bmm(self.g2.transpose(1, 2), self.a)
            torch.bmm(self.g2, self.w2)
            torch.bmm(self.left, self.right.transpose(1, 2))
            torch.bmm(self.gd, self.z)


def gemm_seconds(device: torch.device, groups: int, in_dim: int, preset, n_steps: int) -> tuple[float, float]:
    gemm = GemmOnly(device, groups, in_dim, preset)
    gemm.steps(5)  # warm-up: cuBLAS handles and kernel choices
    sync(device)
    t0 = time.perf_counter()
    gemm.steps(n_steps)
    sync(device)
    wall = time.perf_counter() - t0
    return wall, gemm.flops * n_steps / wall / 1e9


# -- report ---------------------------------------------------------------------------------------------
def environment(device: torch.device) -> dict:
    settings = configure_device(device)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": settings.device,
        "device_name": settings.device_name,
        "deterministic": settings.deterministic,
        "cublas_workspace": settings.cublas_workspace,
        "float32_matmul": settings.float32_matmul,
        "torch": settings.torch_version,
        "cuda": settings.cuda_version,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }


def markdown(result: dict) -> str:
    env, run = result["environment"], result["run"]
    lines = [
        f"# gpu_factorial: {result['runs']} runs x {result['epochs']} epochs ({result['dataset']}, {result['mode']})",
        "",
        f"{env['date']}: {env['device_name']} ({env['device']}), torch {env['torch']}, CUDA {env['cuda']}, "
        f"Python {env['python']}, NumPy {env['numpy']}; deterministic algorithms {env['deterministic']}, "
        f"CUBLAS_WORKSPACE_CONFIG {env['cublas_workspace']}, float32 matmul {env['float32_matmul']}.",
        "",
        "| phase | seconds |",
        "|---|---|",
        f"| warm-up (1 epoch, not counted) | {result['warmup_s']:.2f} |",
        f"| training (3 seeds x 4 cells) | {run['train_s']:.2f} |",
        f"| evaluation (12 models x 3 Q/G perturbations) | {run['evaluate_s']:.2f} |",
        f"| audit evidence | {run['audit_s']:.3f} |",
        f"| **end to end** | **{run['total_s']:.2f}** |",
        "",
        f"Median epoch ({'all 12 stacked cells' if result['mode'] == 'stacked' else 'one seed job, 4 cells'}, "
        f"training loop): {run['median_epoch_s'] * 1e3:.1f} ms.",
    ]
    gemm = result.get("gemm")
    if gemm:
        lines.append(
            f"GEMM-only time at the same shapes and step count: {gemm['seconds']:.2f} s ({gemm['gflops']:.0f} GFLOP/s); "
            f"training / GEMM-only = {run['train_s'] / gemm['seconds']:.1f}x."
        )
    cpu = result.get("cpu_reference")
    if cpu:
        lines.append(
            f"Same code on CPU ({cpu['threads']} threads): {cpu['train_s_extrapolated']:.1f} s training "
            f"(extrapolated from {cpu['epochs_measured']} epochs at {cpu['epoch_s']:.3f} s) + "
            f"{cpu['evaluate_s']:.1f} s evaluation = {cpu['total_s']:.1f} s; CPU / {env['device']} = "
            f"{cpu['total_s'] / run['total_s']:.1f}x."
        )
    lines += ["", "| audit evidence | ok | detail |", "|---|---|---|"]
    lines += [f"| {k} | {v['ok']} | {v['detail']} |" for k, v in run["audits"].items()]
    target = f"Target (whole factorial under {TARGET_SECONDS:.0f} s on one H200): "
    if env["device"].startswith("cuda"):
        target += f"{'met' if result['target_met'] else 'not met'} on {env['device_name']} ({run['total_s']:.1f} s)."
    else:
        target += f"not applicable to this {env['device']} run."
    lines += [
        "",
        target,
        f"Fingerprint (final models and test metrics): `{run['fingerprint']}`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--dataset", choices=sorted(CONFIGS), default="cub")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--mode", choices=("stacked", "per-seed"), default="stacked")
    ap.add_argument("--threads", type=int, default=1, help="compute.threads_per_worker of the jobs")
    ap.add_argument("--cpu-epochs", type=int, default=2, help="epochs of the CPU reference (0: none)")
    ap.add_argument("--cpu-threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-gemm", action="store_true", help="skip the GEMM-only floor")
    ap.add_argument("--out", type=Path, required=True, help="folder for gpu_factorial.json and .md")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "gpu_factorial: --device cuda, but no CUDA device is available (torch.cuda.is_available() is "
            "False); run it on a machine with an NVIDIA GPU and a CUDA build of torch, or pass --device cpu",
            file=sys.stderr,
        )
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    env = environment(device)
    print(f"# gpu_factorial  {env['date']}  {env['device_name']}, torch {env['torch']}, CUDA {env['cuda']}", flush=True)
    preset = preset_for(args.epochs, str(device), args.threads, SEEDS)
    result: dict = {
        "dataset": args.dataset,
        "epochs": args.epochs,
        "runs": 4 * len(SEEDS),
        "mode": args.mode,
        "environment": env,
    }
    with tempfile.TemporaryDirectory(prefix="hc-gpu-") as tmp:
        root = Path(tmp)
        fs, data, files = prepare(root, args.dataset)
        # Warm-up: CUDA context, kernels and allocator, as a first job in a fresh process would pay once.
        t0 = time.perf_counter()
        warm = final_specs(root, fs, data, files, preset_for(1, str(device), args.threads, SEEDS), "warm")
        train(warm, args.mode, {s.job_id: [] for s in warm})
        sync(device)
        result["warmup_s"] = time.perf_counter() - t0
        run = factorial(root, fs, data, files, preset, args.mode, "study", device)
        result["run"] = run
        print(f"  {result['runs']} runs x {args.epochs} epochs ({args.mode}): {run['total_s']:.2f} s end to end "
              f"(training {run['train_s']:.2f} s, evaluation {run['evaluate_s']:.2f} s)", flush=True)
        n_train = len(np.load(files["train"])["fit"])
        steps = n_train // preset.training.batch_size * args.epochs
        if not args.no_gemm:
            wall, gflops = gemm_seconds(device, len(SEEDS), fs.dim, preset, steps)
            result["gemm"] = {"seconds": wall, "gflops": gflops, "steps": steps}
            print(f"  GEMM-only at the same shapes, {steps} steps: {wall:.2f} s ({gflops:.0f} GFLOP/s)", flush=True)
        if args.cpu_epochs and device.type != "cpu":
            # As a CPU worker runs: CUDA's deterministic-algorithm switch (which also fills every new
            # tensor with NaN first) is off there.
            torch.use_deterministic_algorithms(False)
            torch.set_num_threads(args.cpu_threads)
            cpu_preset = preset_for(args.cpu_epochs, "cpu", args.cpu_threads, SEEDS)
            cpu = factorial(root, fs, data, files, cpu_preset, args.mode, "cpu", torch.device("cpu"))
            epoch_s = cpu["train_s"] / args.cpu_epochs
            result["cpu_reference"] = {
                "threads": args.cpu_threads,
                "epochs_measured": args.cpu_epochs,
                "epoch_s": epoch_s,
                "train_s_extrapolated": epoch_s * args.epochs,
                "evaluate_s": cpu["evaluate_s"],
                "total_s": epoch_s * args.epochs + cpu["evaluate_s"],
            }
            print(f"  CPU reference: {result['cpu_reference']['total_s']:.1f} s (extrapolated)", flush=True)
        shutil.rmtree(root / "warm", ignore_errors=True)
    result["target_met"] = bool(device.type == "cuda" and run["total_s"] < TARGET_SECONDS)
    result["audits_ok"] = all(v["ok"] for v in run["audits"].values())
    (args.out / "gpu_factorial.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    (args.out / "gpu_factorial.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if result["audits_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
