"""Temperature tuning kept apart from the finals: every candidate trains the same parameters from one
initial state on the same batches, no tuning state reaches a final run or the test, and every final run
trains from a fresh start."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter

from hierconsole.plurals import counted
from hierconsole.study.analysis.audits.fairness import expected_trainable
from hierconsole.study.analysis.audits.result import (
    Check,
    Row,
    Study,
    cell_name,
    evidence,
    majority,
    updates_per_epoch,
)
from hierconsole.vocabulary import HIER_AUTHORS_EXEMPT, HIER_STYLE, JobState


@dataclass(frozen=True)
class Candidates:
    study: Study
    states: list[str]
    """The state of each tuning job."""
    runs: list[Row]
    """The candidates' runs, by temperature and arm."""
    dim: int | None
    """The input dimension of the study's dataset."""
    epochs: list[Row]
    """One per candidate run and epoch: epoch, run_id, batch_sha256, updates."""


@dataclass(frozen=True)
class TuningReuse:
    finals: list[Row]
    """The final runs, by seed and arm."""
    tuning_dirs: dict[str, str]
    """Tuning job -> its folder."""
    final_dirs: dict[str, str]
    """Final job -> its folder."""
    ends: dict[str, str]
    """A candidate's end-state SHA256 -> its run."""
    handed: dict[str, list[tuple[str, str | None]]]
    """Final job -> (what, the path it was handed, resolved) for its output folder and splits."""
    scored: list[tuple[str, str, str]] | None
    """(run_id, weights as the evaluation's spec names them, resolved) of each model it scores; None before
    the evaluation exists."""


@dataclass(frozen=True)
class FromScratch:
    study: Study
    finals: list[Row]
    """The final runs, by seed and arm."""
    train_rows: int
    """The rows the final runs fit."""
    epochs: dict[str, list[tuple[int, int]]]
    """Final run -> (epoch, updates by its end), by epoch."""
    tuning_inits: list[str]
    """The distinct initial states of the candidates."""


def _candidates(e: Candidates, name: str) -> Check | None:
    """The check's result when there is nothing (yet) to compare: a study whose temperatures the preset fixes
    passes vacuously; one whose tuning has not finished is pending."""
    preset = e.study.preset
    tuned = preset.tuned_geometries
    if not tuned:
        return Check(name, True, "no temperature tuning: the preset fixes every temperature")
    expected = len(preset.temperature.tuning.candidates) * len(tuned)
    if not e.states or any(s != JobState.FINISHED for s in e.states) or len(e.runs) < expected:
        return Check(name, None, f"temperature tuning not finished ({len(e.runs)} of {expected} candidate runs)")
    return None


def tuning_same_init(e: Candidates) -> Check:
    """Every temperature candidate (of either geometry) starts from one trainable initial state."""
    name = "tuning_same_init"
    early = _candidates(e, name)
    if early is not None:
        return early
    common, odd = majority(e.runs, itemgetter("init_sha256"))
    bad = [
        f"{cell_name(r['run_id'])} starts from {str(r['init_sha256'])[:12]}, the other candidates from {common[:12]}"
        for r in odd
    ]
    summary = f"{len(e.runs)} candidate runs: initial-state SHA256s {sorted({str(r['init_sha256'])[:12] for r in e.runs})}"
    return Check(name, not bad, evidence(summary, bad))


def tuning_same_batch_order(e: Candidates) -> Check:
    """Every temperature candidate sees the same batches in the same order, with the same update count."""
    name = "tuning_same_batch_order"
    early = _candidates(e, name)
    if early is not None:
        return early
    runs, rows = e.runs, e.epochs
    by_epoch: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        by_epoch[r["epoch"]].append(r)
    recorded = {x["run_id"] for x in rows}
    bad = [f"{cell_name(r['run_id'])} recorded no training epoch" for r in runs if r["run_id"] not in recorded]
    for epoch, cells in sorted(by_epoch.items()):
        if len(cells) != len(runs):
            bad.append(f"epoch {epoch}: {len(cells)} of {len(runs)} candidate runs recorded it")
        for column, what in (("batch_sha256", "batch order"), ("updates", "update count")):
            common, odd = majority(cells, itemgetter(column))
            bad += [
                f"epoch {epoch}: {cell_name(r['run_id'])} {what} {str(r[column])[:12]}, the other candidates "
                f"{str(common)[:12]}"
                for r in odd
            ]
    summary = (
        f"{len(runs)} candidate runs over {counted(len(by_epoch), 'epoch')}: one batch-order SHA256 and one "
        "update count per epoch"
    )
    return Check(name, not bad, evidence(summary, bad))


def tuning_same_parameters(e: Candidates) -> Check:
    """Every temperature candidate trains the same number of parameters, the final cells' count."""
    name = "tuning_same_parameters"
    early = _candidates(e, name)
    if early is not None:
        return early
    assert e.dim is not None  # a study with tuning runs has its dataset
    training = e.study.recorded["training"]
    expected = expected_trainable(e.dim, training["hidden"], training["out_dim"])
    bad = [f"{cell_name(r['run_id'])} has {r['trainable_params']:,}" for r in e.runs if r["trainable_params"] != expected]
    summary = (
        f"{len(e.runs)} candidate runs: {sorted({r['trainable_params'] for r in e.runs})} trainable parameters; "
        f"expected {expected:,} for {e.dim}-D input"
    )
    return Check(name, not bad, evidence(summary, bad))


def tuning_checkpoints_not_reused(e: TuningReuse) -> Check:
    """No tuning state reaches a final or the test: no final job is handed a file of a tuning job's
    folder, no final run ends in a candidate's end state, and evaluation loads final jobs' files only."""
    name = "tuning_checkpoints_not_reused"
    finals = e.finals
    if not finals or any(r["final_sha256"] is None for r in finals):
        return Check(name, None, "final runs not finished")

    def tuning_folder(path: str | None) -> str | None:
        if path is None:
            return None
        return next((cell_name(j) for j, d in e.tuning_dirs.items() if path == d or path.startswith(d + "/")), None)

    bad = []
    final_jobs = sorted({r["job_id"] for r in finals})
    for job_id in final_jobs:
        for what, path in e.handed[job_id]:
            source = tuning_folder(path)
            if source is not None:
                bad.append(f"{cell_name(job_id)} was given its {what} in tuning job {source}'s folder")
    bad += [
        f"{cell_name(r['run_id'])} ends in the state of tuning run {cell_name(e.ends[r['final_sha256']])}"
        for r in finals
        if r["final_sha256"] in e.ends
    ]
    own = {e.final_dirs[j] for j in final_jobs}
    for run_id, named, weights in e.scored or ():
        source = tuning_folder(weights)
        if source is not None:
            bad.append(f"evaluation scores {cell_name(run_id)} from tuning job {source}'s folder")
        elif not any(weights.startswith(d + "/") for d in own):
            bad.append(f"evaluation scores {cell_name(run_id)} from {named}, outside the final jobs' folders")
    summary = (
        f"{len(e.tuning_dirs)} tuning and {len(final_jobs)} final jobs: no final job reads a tuning folder, no final "
        f"state equals one of {counted(len(e.ends), 'candidate end state')}"
        + (f", all {counted(len(e.scored), 'scored model')} load final jobs' files" if e.scored is not None else "")
    )
    return Check(name, not bad, evidence(summary, bad))


def finals_retrained_from_scratch(e: FromScratch) -> Check:
    """Every final run trained from a fresh initialisation: its epochs run from 1 with one epoch's updates
    each (none continues a run that had already trained), and a final run of the tuning seed starts from the
    candidates' own fresh initial state."""
    name = "finals_retrained_from_scratch"
    finals = e.finals
    if not finals or any(r["final_sha256"] is None for r in finals):
        return Check(name, None, "final runs not finished")
    preset = e.study.preset
    n = e.train_rows
    t = preset.training
    per_epoch = updates_per_epoch(n, t.batch_size, t.drop_last)
    hier = e.study.authors_hier
    bad = []
    for r in finals:
        seen = e.epochs.get(r["run_id"], [])
        if [ep for ep, _ in seen] != list(range(1, t.epochs + 1)):
            bad.append(f"{cell_name(r['run_id'])} recorded epochs {[ep for ep, _ in seen][:3]}..., not 1 to {t.epochs}")
            continue
        own = n // hier.batch_size if hier is not None and r["arm"] == HIER_STYLE else per_epoch
        off = [(ep, u) for ep, u in seen if u != ep * own]
        if off:
            ep, u = off[0]
            bad.append(f"{cell_name(r['run_id'])} had made {u} updates by epoch {ep}, not {ep} x {own}")
    seed = preset.temperature.tuning.seed
    shared = ""
    if len(e.tuning_inits) == 1 and seed in t.seeds:
        fresh = e.tuning_inits[0]
        bad += [
            f"{cell_name(r['run_id'])} starts from {str(r['init_sha256'])[:12]}, not the fresh seed-{seed} state "
            f"{fresh[:12]} the tuning candidates started from"
            for r in finals
            if r["seed"] == seed and r["init_sha256"] != fresh and not (hier is not None and r["arm"] == HIER_STYLE)
        ]
        shared = f"; seed {seed} starts from the tuning candidates' fresh state {fresh[:12]}"
        if hier is not None:
            shared += f" ({HIER_STYLE} from its own head's: {HIER_AUTHORS_EXEMPT})"
    hier_rate = "" if hier is None else f", {HIER_STYLE} {n // hier.batch_size} (authors' recipe)"
    summary = (
        f"{len(finals)} final cells trained epochs 1 to {t.epochs} from zero updates ({per_epoch} per epoch{hier_rate})"
        f"{shared}"
    )
    return Check(name, not bad, evidence(summary, bad))
