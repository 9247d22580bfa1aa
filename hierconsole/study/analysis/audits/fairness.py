"""Fairness of the comparison: every final cell trains the same parameter count from the same initial state
on the same batches for the same number of updates, on one fixed device setup, and ends in a state that
reloads exactly (a hyperbolic one inside its ball)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from hierconsole.plurals import counted
from hierconsole.study.analysis.audits.result import (
    SHOWN,
    Check,
    Row,
    Study,
    cell_name,
    evidence,
    majority,
    updates_per_epoch,
)
from hierconsole.vocabulary import HIER_AUTHORS_EXEMPT, HIER_STYLE, POINCARE, JobState

NORM_TOLERANCE = 1e-6  # float32 rounding of the analytic bound

EXEMPT_CHECKS: tuple[str, ...] = ("trainable_parameters", "same_init_within_seed", "same_batch_order")
"""The cell-comparing audits that leave out the HIER-style arm under the authors' recipe (its own head,
init and class-balanced batches); `hier_authors_recipe` checks that arm against its own recipe instead."""

DEVICE_SETTINGS = ("device_name", "deterministic", "cublas_workspace", "float32_matmul", "torch_version")
"""What a start event records of a job's device and determinism (engine.determinism.DeviceSettings)."""


@dataclass(frozen=True)
class FinalCells:
    study: Study
    runs: list[Row]
    """The final runs (rows of `runs`), by seed and arm."""
    dim: int | None
    """The input dimension of the study's dataset."""
    job_states: list[str]
    """The state of each final job."""
    train_rows: int | None = None
    """The rows the final runs fit (the final-train split's `fit`), where a check needs them."""


@dataclass(frozen=True)
class FinalEpochs:
    study: Study
    rows: list[Row]
    """One per final run and epoch: seed, epoch, run_id, arm, batch_sha256, updates."""


@dataclass(frozen=True)
class FinalJobs:
    jobs: list[tuple[str, int, str]]
    """(job_id, threads, device) of each final job."""
    starts: dict[str, dict[str, Any]]
    """Final job -> the payload of its latest start event."""


def expected_trainable(in_dim: int, hidden: int, out_dim: int) -> int:
    """Linear(d, h) + BatchNorm1d(h) affine + Linear(h, o): 205,600 at d=768, h=256, o=32."""
    return in_dim * hidden + hidden + 2 * hidden + hidden * out_dim + out_dim


def compared(study: Study, runs: list[Row]) -> tuple[list[Row], str]:
    """The runs a cell-comparing audit compares, and the note naming the ones it exempts ('' when none)."""
    if study.authors_hier is None:
        return runs, ""
    exempt = [r for r in runs if r["arm"] == HIER_STYLE]
    if not exempt:
        return runs, ""
    return [r for r in runs if r["arm"] != HIER_STYLE], f"; {HIER_STYLE} ({counted(len(exempt), 'run')}): {HIER_AUTHORS_EXEMPT}"


def trainable_parameters(e: FinalCells) -> Check:
    if not e.runs:
        return Check("trainable_parameters", None, "no final runs yet")
    assert e.dim is not None  # it has final runs, so the study and its dataset are registered
    training = e.study.recorded["training"]
    expected = expected_trainable(e.dim, training["hidden"], training["out_dim"])
    runs, exempt = compared(e.study, e.runs)
    bad = [
        f"{cell_name(r['run_id'])} has {r['trainable_params']:,}"
        for r in runs
        if r["trainable_params"] != expected
    ]
    counts = sorted({r["trainable_params"] for r in runs})
    summary = f"{len(runs)} cells: {counts} trainable parameters; expected {expected:,} for {e.dim}-D input{exempt}"
    return Check("trainable_parameters", not bad, evidence(summary + objectives_add(runs), bad))


def objectives_add(runs: list[Row]) -> str:
    """What the factorial's objectives add to the compared projectors (leaf prototypes): '' when none do.
    The HIER-style baseline's proxies are its own recipe's, not a factorial objective's, and unnamed here."""
    added: dict[str, set[int]] = defaultdict(set)
    for r in runs:
        if r.get("objective_params") and r["arm"] != HIER_STYLE:
            added[r["loss"]].add(int(r["objective_params"]))
    if not added:
        return ""
    said = ", ".join(f"{loss} {' or '.join(f'{n:,}' for n in sorted(ns))}" for loss, ns in sorted(added.items()))
    return f"; objectives add parameters of their own, not compared: {said}"


def same_init_within_seed(e: FinalCells) -> Check:
    if not e.runs:
        return Check("same_init_within_seed", None, "no final runs yet")
    runs, exempt = compared(e.study, e.runs)
    by_seed: dict[int, list[Row]] = defaultdict(list)
    for r in runs:
        by_seed[r["seed"]].append(r)
    bad, ok = [], []
    for seed, cells in sorted(by_seed.items()):
        common, odd = majority(cells, lambda r: r["init_sha256"])
        if odd:
            bad += [
                f"seed {seed}: {cell_name(r['run_id'])} starts from {str(r['init_sha256'])[:12]}, the other "
                f"cells from {common[:12]}"
                for r in odd
            ]
        else:
            ok.append(f"seed {seed}: {common[:12]}")
    distinct = {seed: len({r["init_sha256"] for r in cells}) for seed, cells in sorted(by_seed.items())}
    summary = (
        f"distinct initial-state hashes per seed: { {s: n for s, n in distinct.items() if n != 1} }"
        if bad
        else f"one initial-state SHA256 per seed ({'; '.join(ok)})"
    ) + exempt
    return Check("same_init_within_seed", not bad, evidence(summary, bad))


def same_batch_order(e: FinalEpochs) -> Check:
    if not e.rows:
        return Check("same_batch_order", None, "no training epochs yet")
    rows, exempt = compared(e.study, e.rows)
    by_epoch: dict[tuple[int, int], list[Row]] = defaultdict(list)
    for r in rows:
        by_epoch[(r["seed"], r["epoch"])].append(r)
    bad: list[str] = []
    disagree: set[tuple[int, int]] = set()
    for (seed, epoch), cells in by_epoch.items():
        for column, what in (("batch_sha256", "batch order"), ("updates", "update count")):
            common, odd = majority(cells, itemgetter(column))
            bad += [
                f"seed {seed} epoch {epoch}: {cell_name(r['run_id'])} {what} {str(r[column])[:12]}, the "
                f"other cells {str(common)[:12]}"
                for r in odd
            ]
            if odd:
                disagree.add((int(seed), int(epoch)))
    summary = (
        f"cells disagree in batch order or update count at (seed, epoch) {sorted(disagree)[:SHOWN]}"
        if bad
        else f"{len(by_epoch)} (seed, epoch) pairs: one batch-order SHA256 and one update count across cells each"
    ) + exempt.replace(" run", " epoch record")
    return Check("same_batch_order", not bad, evidence(summary, bad))


def update_budget(e: FinalCells) -> Check:
    runs = e.runs
    if not runs or any(r["updates"] is None for r in runs):
        return Check("update_budget", None, "final runs not finished")
    assert e.train_rows is not None  # gathered for this check
    n = e.train_rows
    t = e.study.recorded["training"]
    expected = updates_per_epoch(n, t["batch_size"], t["drop_last"]) * t["epochs"]
    rule = f"floor({n}/{t['batch_size']})" if t["drop_last"] else f"ceil({n}/{t['batch_size']})"
    hier = e.study.authors_hier
    hier_budget = None if hier is None else (n // hier.batch_size) * t["epochs"]
    bad = [
        f"{cell_name(r['run_id'])} made {r['updates']}"
        for r in runs
        if r["updates"] != (hier_budget if hier_budget is not None and r["arm"] == HIER_STYLE else expected)
    ]
    counts = sorted({r["updates"] for r in runs if hier_budget is None or r["arm"] != HIER_STYLE})
    summary = f"updates per cell {counts}; expected {rule} x {t['epochs']} = {expected}"
    if hier is not None and hier_budget is not None:
        # The same epochs over the same training rows, in the authors' class-balanced batches.
        hier_counts = sorted({r["updates"] for r in runs if r["arm"] == HIER_STYLE})
        summary += (
            f"; {HIER_STYLE} (authors' recipe) {hier_counts}; expected floor({n}/{hier.batch_size}) x "
            f"{t['epochs']} = {hier_budget}"
        )
    return Check("update_budget", not bad, evidence(summary, bad))


def checkpoint_reload_exact(e: FinalCells) -> Check:
    runs = e.runs
    if not runs or any(r["reload_max_diff"] is None for r in runs):
        return Check("checkpoint_reload_exact", None, "final runs not finished")
    bad = [
        f"{cell_name(r['run_id'])} differs by {r['reload_max_diff']:g}"
        for r in runs
        if r["reload_max_diff"] != 0.0
    ]
    worst = max(r["reload_max_diff"] for r in runs)
    summary = f"max |diff| of the reloaded verification sample over {len(runs)} cells: {worst:g}"
    return Check("checkpoint_reload_exact", not bad, evidence(summary, bad))


def hyperbolic_norms_in_ball(e: FinalCells) -> Check:
    runs = [r for r in e.runs if r["geometry"] == POINCARE]
    trained = e.study.recorded["training"]["cells"]
    if not any(e.study.preset.factorial.cell(arm)[0].name == POINCARE for arm in trained):
        # Nothing to bound: the check holds vacuously rather than waiting for embeddings that never come.
        # (A Lorentz cell's points lie on the hyperboloid by construction: no ball, no norm to bound.)
        return Check("hyperbolic_norms_in_ball", True, f"no hyperbolic (Poincaré-ball) cell in this study (cells {', '.join(trained)})")
    if not runs or any(r["max_norm"] is None for r in runs):
        return Check("hyperbolic_norms_in_ball", None, "no official-test hyperbolic embeddings yet")
    bad = []
    for r in runs:
        name, norm = cell_name(r["run_id"]), r["max_norm"]
        if not norm < r["ball_radius"]:
            bad.append(f"{name} max norm {norm:.6f} is not inside the ball of radius {r['ball_radius']:.6f}")
        elif norm > r["norm_bound"] + NORM_TOLERANCE:
            bad.append(f"{name} max norm {norm:.6f} exceeds the analytic bound {r['norm_bound']:.6f}")
    worst = max(runs, key=lambda r: r["max_norm"])
    summary = (
        f"max norm {worst['max_norm']:.6f} ({worst['run_id']}); ball radius {worst['ball_radius']:.4f}, "
        f"analytic bound {worst['norm_bound']:.6f}"
    )
    return Check("hyperbolic_norms_in_ball", not bad, evidence(summary, bad))


def _described(settings: dict[str, Any]) -> str:
    text = f"{settings['device_name']}, torch {settings['torch_version']}"
    if settings["deterministic"] is not None:
        text += (
            f", deterministic algorithms {settings['deterministic']}, "
            f"CUBLAS_WORKSPACE_CONFIG {settings['cublas_workspace']}"
        )
    return f"{text}, float32 matmul {settings['float32_matmul']}"


def fixed_thread_count(e: FinalJobs) -> Check:
    """One thread count and device for every final job, and (where recorded) one device setup, CUDA
    jobs with strict deterministic algorithms: what bitwise determinism of a study rests on."""
    rows = e.jobs
    if not rows:
        return Check("fixed_thread_count", None, "no final jobs yet")
    common, odd = majority(rows, lambda r: (r[1], r[2]))
    bad = [
        f"{cell_name(job_id)} ran with {t} thread(s) on {d}, the others with {common[0]} on {common[1]}"
        for job_id, t, d in odd
    ]
    distinct = sorted({(t, d) for _, t, d in rows})
    summary = (
        f"final jobs ran with (threads, device) {distinct}: bitwise determinism needs one fixed count"
        if bad
        else f"final jobs ran with (threads, device) {distinct}: bitwise determinism holds for a fixed count"
    )
    # Jobs whose worker predates the recorded device settings are left out.
    settings = {
        job_id: {k: p.get(k) for k in DEVICE_SETTINGS}
        for job_id, p in e.starts.items()
        if p.get("torch_version") is not None
    }
    if settings:
        key = lambda item: tuple(item[1][k] for k in DEVICE_SETTINGS)  # noqa: E731
        usual, others = majority(settings.items(), key)
        bad += [f"{cell_name(job_id)} ran on {_described(s)}" for job_id, s in others]
        bad += [
            f"{cell_name(job_id)} ran on CUDA with deterministic algorithms {s['deterministic']}, not strict"
            for job_id, s in sorted(settings.items())
            if s["deterministic"] not in (None, "strict")
        ]
        summary += f"; device: {_described(dict(zip(DEVICE_SETTINGS, usual, strict=True)))}"
    return Check("fixed_thread_count", not bad, evidence(summary, bad))


def final_runs_complete(e: FinalCells) -> Check:
    """Every training seed x trained cell of the preset has exactly one final run, finished with a recorded
    final state that reloads exactly; no other final run exists."""
    name = "final_runs_complete"
    states = e.job_states
    if not states or any(s != JobState.FINISHED for s in states):
        return Check(name, None, "final runs not finished")
    preset = e.study.preset
    cells = [*preset.cells, *([HIER_STYLE] if HIER_STYLE in preset.evaluation.baselines else [])]
    expected = {(seed, arm) for seed in preset.training.seeds for arm in cells}
    runs = e.runs
    have = {(r["seed"], r["arm"]): r for r in runs}
    bad = [f"seed {seed} has no final run of {arm}" for seed, arm in sorted(expected.difference(have))]
    bad += [f"{cell_name(r['run_id'])} is not a cell of the preset" for k, r in sorted(have.items()) if k not in expected]
    bad += [f"{cell_name(r['run_id'])} has no recorded final state" for r in runs if r["final_sha256"] is None]
    verified = sum(
        1 for k, r in have.items() if k in expected and r["final_sha256"] is not None and r["reload_max_diff"] == 0.0
    )
    summary = (
        f"{verified}/{len(expected)} final runs verified ({counted(len(preset.training.seeds), 'seed')} x "
        f"{counted(len(cells), 'cell')}: final state recorded, reload exact)"
    )
    if verified < len(expected) and not bad:
        bad.append("a final run does not reload exactly (see checkpoint_reload_exact)")
    return Check(name, not bad, evidence(summary, bad))
