"""A study: one preset on one dataset, from split generation to locked, evaluated and audited.

Phases: tuning -> training -> locked -> evaluating -> complete. The official test perturbations are
written at creation (so their hashes are fixed before any training) but are handed to a job only by
`evaluate_job`, which refuses until the study is locked and records when the test was first read.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from hierconsole.catalog import get_dataset
from hierconsole.datasets import FeatureSet
from hierconsole.datasets.splits import (
    Split,
    hierarchy_disjoint_split,
    official_split,
    qg_perturbation,
    strict_valid_counts,
    tuning_split,
)
from hierconsole.errors import HierconsoleError, NotFoundError, SealError
from hierconsole.jobspec import ARMS, CellSpec, Hyper, JobSpec, arm_parts
from hierconsole.protocol import TUNE, Preset
from hierconsole.storage import Store

PHASES = ("tuning", "training", "locked", "evaluating", "complete")
ACTIVE_STATES = ("queued", "running")


def study_dir(store: Store, study_id: str) -> Path:
    return store.home / "studies" / study_id


def job_dir(store: Store, job_id: str) -> Path:
    study_id, rest = job_id.split("/", 1)
    return study_dir(store, study_id) / "jobs" / rest


@dataclass(frozen=True)
class StudyInfo:
    study_id: str
    name: str
    dataset_id: str
    phase: str
    preset: Preset
    preset_sha256: str
    temperatures: dict[str, float] | None
    locked_at: datetime | None
    test_first_read_at: datetime | None


def get_study(store: Store, study_id: str) -> StudyInfo:
    rows = store.dicts("SELECT * FROM studies WHERE study_id = ?", [study_id])
    if not rows:
        known = [r[0] for r in store.rows("SELECT study_id FROM studies ORDER BY created_at")]
        raise NotFoundError(
            f"no study {study_id!r} in the store (known: {', '.join(known) or 'none yet'}); "
            "start one with `hierconsole run PRESET`"
        )
    r = rows[0]
    return StudyInfo(
        study_id=r["study_id"],
        name=r["name"],
        dataset_id=r["dataset_id"],
        phase=r["phase"],
        preset=Preset.from_dict(json.loads(r["preset"]), source=f"study {study_id}"),
        preset_sha256=r["preset_sha256"],
        temperatures=json.loads(r["temperatures"]) if r["temperatures"] else None,
        locked_at=r["locked_at"],
        test_first_read_at=r["test_first_read_at"],
    )


def list_studies(store: Store) -> list[dict[str, Any]]:
    return store.dicts(
        "SELECT s.study_id, s.name, s.dataset_id, s.phase, s.created_at, "
        "count(j.job_id) FILTER (WHERE j.state = 'finished') AS jobs_finished, count(j.job_id) AS jobs "
        "FROM studies s LEFT JOIN jobs j USING (study_id) GROUP BY ALL ORDER BY s.created_at, s.study_id"
    )


def resolve_study(store: Store, study: str | None) -> str:
    """A study id from an id, a unique prefix, a study name (newest wins), or None for the newest."""
    if study is None:
        row = store.one("SELECT study_id FROM studies ORDER BY created_at DESC LIMIT 1")
        if row is None:
            raise NotFoundError("the store holds no study yet; start one with `hierconsole run PRESET`")
        return row[0]
    rows = store.rows(
        "SELECT study_id FROM studies WHERE study_id = ? OR name = ? OR starts_with(study_id, ?) "
        "ORDER BY study_id = ? DESC, created_at DESC",
        [study, study, study, study],
    )
    if not rows:
        get_study(store, study)  # raises with the list of known studies
    return rows[0][0]


# -- creation ----------------------------------------------------------------------------------------


def _save_split(folder: Path, role: str, parts: dict[str, np.ndarray]) -> Path:
    path = folder / f"{role.replace(':', '-')}.npz"
    np.savez(path, **{k: np.asarray(v, dtype=np.int64) for k, v in parts.items()})
    return path


def _hyper(preset: Preset) -> Hyper:
    t = preset.training
    return Hyper(
        lr=t.lr,
        weight_decay=t.weight_decay,
        batch_size=t.batch_size,
        drop_last=t.drop_last,
        grad_clip=t.grad_clip,
        dropout=t.dropout,
        epochs=t.epochs,
        hidden=t.hidden,
        out_dim=t.out_dim,
        targets=tuple(t.regression_targets),
        level_weights=tuple(t.level_weights),
        c=preset.geometry.poincare.c,
        r=preset.geometry.poincare.r,
    )


def new_study_id(preset: Preset) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{preset.name}-{stamp}-{secrets.token_hex(2)}"


def create_study(store: Store, preset: Preset, dataset_id: str) -> str:
    """Register a study: splits (with hashes and strict valid counts) and its first jobs."""
    info = get_dataset(store, dataset_id)
    fs = FeatureSet.load(info.artifact_dir)
    if fs.dim < 1:
        raise HierconsoleError(f"dataset {dataset_id!r} has no feature columns")
    labels = fs.labels
    sp = preset.split
    if sp.protocol == "official":
        protocol = official_split(fs)
    else:
        kwargs: dict[str, Any] = {"level": sp.level, "seed": sp.seed}
        if sp.counts is not None:
            kwargs["counts"] = tuple(sp.counts)
        if sp.fractions is not None:
            kwargs["fractions"] = tuple(sp.fractions)
        protocol = hierarchy_disjoint_split(labels, **kwargs)
    parts = protocol.parts
    for needed in ("train", "test"):
        if needed not in parts or len(parts[needed]) == 0:
            raise HierconsoleError(
                f"dataset {dataset_id!r} has no {needed} samples under the {sp.protocol!r} split protocol"
            )
    train_idx = parts["train"]
    val_idx = parts.get("val")
    if val_idx is not None and len(val_idx) == 0:
        val_idx = None
    dev_idx = np.sort(np.concatenate([train_idx, val_idx])) if val_idx is not None else train_idx
    test_idx = parts["test"]
    n_query = preset.evaluation.n_query
    if n_query >= len(test_idx):
        raise HierconsoleError(
            f"{preset.source}: evaluation.n_query = {n_query} but the test split holds only {len(test_idx)} "
            f"samples; choose fewer queries (at most {len(test_idx) - 1})"
        )
    tuning = tuning_split(
        labels,
        train_idx,
        val_idx,
        query_fraction=preset.temperature.tuning.query_fraction,
        seed=preset.temperature.tuning.seed,
    )
    qgs: dict[int, Split] = {
        s: qg_perturbation(labels, test_idx, n_query=n_query, seed=s) for s in preset.evaluation.qg_seeds
    }

    study_id = new_study_id(preset)
    folder = study_dir(store, study_id)
    split_dir = folder / "splits"
    split_dir.mkdir(parents=True, exist_ok=False)
    rows: list[list[Any]] = []

    def add(role: str, split: Split, valid: dict[str, int] | None, files: dict[str, np.ndarray]) -> None:
        path = _save_split(split_dir, role, files)
        sizes = {k: int(len(v)) for k, v in split.parts.items()}
        rows.append(
            [
                study_id,
                role,
                split.kind,
                split.sha256(),
                json.dumps(sizes),
                json.dumps(valid) if valid is not None else None,
                json.dumps(split.params, default=str),
                str(path),
            ]
        )

    add("protocol", protocol, None, protocol.parts)
    add("final_train", protocol, None, {"fit": dev_idx})
    add(
        "tuning",
        tuning,
        strict_valid_counts(labels, tuning.parts["query"], tuning.parts["gallery"]),
        tuning.parts,
    )
    add("tune_train", tuning, None, {"fit": tuning.parts["fit"]})
    add(
        "val",
        tuning,
        strict_valid_counts(labels, tuning.parts["query"], tuning.parts["gallery"]),
        {"query": tuning.parts["query"], "gallery": tuning.parts["gallery"]},
    )
    for s, qg in qgs.items():
        add(f"qg:{s}", qg, strict_valid_counts(labels, qg.parts["query"], qg.parts["gallery"]), qg.parts)

    tuned = preset.temperature.tuned_geometries
    phase = "tuning" if tuned else "training"
    temps = (
        None if tuned else {g: float(preset.temperature.for_geometry(g)) for g in ("euclidean", "poincare")}
    )

    def insert(con) -> None:
        con.execute(
            "INSERT INTO studies (study_id, name, dataset_id, preset, preset_sha256, phase, temperatures) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                study_id,
                preset.name,
                dataset_id,
                preset.canonical_json(),
                preset.sha256(),
                phase,
                json.dumps(temps) if temps else None,
            ],
        )
        con.executemany("INSERT INTO splits VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        specs = (
            _tune_jobs(store, study_id, preset, info.artifact_dir)
            if tuned
            else _final_jobs(store, study_id, preset, info.artifact_dir, temps or {})
        )
        _insert_jobs(con, specs)

    try:
        store.write(insert)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return study_id


def _split_path(store: Store, study_id: str, role: str) -> str:
    return str(study_dir(store, study_id) / "splits" / f"{role.replace(':', '-')}.npz")


def _base_spec(
    store: Store,
    study_id: str,
    preset: Preset,
    dataset_dir: Path,
    job_id: str,
    kind: str,
    seed: int,
    cells: tuple[CellSpec, ...],
    epochs: int,
) -> JobSpec:
    hyper = _hyper(preset)
    hyper = Hyper(**{**hyper.__dict__, "epochs": epochs})
    return JobSpec(
        job_id=job_id,
        study_id=study_id,
        kind=kind,
        seed=seed,
        dataset_dir=str(dataset_dir),
        out_dir=str(job_dir(store, job_id)),
        cells=cells,
        hyper=hyper,
        device=preset.compute.device,
        threads=preset.compute.threads_per_worker,
        aggregation=preset.evaluation.aggregation,
        splits={},
        val_every=preset.training.val_every or 0,
        taxonomy_shuffle_seed=preset.controls.shuffle_seed if preset.controls.taxonomy_shuffle else None,
    )


def _tune_jobs(store: Store, study_id: str, preset: Preset, dataset_dir: Path) -> list[JobSpec]:
    tcfg = preset.temperature.tuning
    specs = []
    for tau in tcfg.candidates:
        cells = tuple(
            CellSpec(arm=("E" if g == "euclidean" else "H") + "_S", geometry=g, loss="supcon", tau=float(tau))
            for g in preset.temperature.tuned_geometries
        )
        spec = _base_spec(
            store,
            study_id,
            preset,
            dataset_dir,
            f"{study_id}/tune-t{tau:g}",
            "tune",
            tcfg.seed,
            cells,
            tcfg.epochs,
        )
        specs.append(
            _with(
                spec,
                splits={
                    "train": _split_path(store, study_id, "tune_train"),
                    "val": _split_path(store, study_id, "val"),
                },
                val_every=tcfg.epochs,
            )
        )
    return specs


def _final_jobs(
    store: Store, study_id: str, preset: Preset, dataset_dir: Path, temps: dict[str, float]
) -> list[JobSpec]:
    specs = []
    for seed in preset.training.seeds:
        cells = []
        for arm in ARMS:
            geometry, loss = arm_parts(arm)
            cells.append(
                CellSpec(
                    arm=arm, geometry=geometry, loss=loss, tau=temps[geometry] if loss == "supcon" else None
                )
            )
        spec = _base_spec(
            store,
            study_id,
            preset,
            dataset_dir,
            f"{study_id}/final-s{seed}",
            "final",
            seed,
            tuple(cells),
            preset.training.epochs,
        )
        splits = {"train": _split_path(store, study_id, "final_train")}
        if preset.training.val_every:
            splits["val"] = _split_path(store, study_id, "val")
        specs.append(_with(spec, splits=splits))
    return specs


def _with(spec: JobSpec, **changes: Any) -> JobSpec:
    from dataclasses import replace

    return replace(spec, **changes)


def _insert_jobs(con, specs: list[JobSpec]) -> None:
    for spec in specs:
        spec.write(Path(spec.out_dir) / "spec.json")
        tau = spec.cells[0].tau if spec.kind == "tune" and spec.cells else None
        con.execute(
            "INSERT INTO jobs (job_id, study_id, kind, seed, tau, state, epochs_total, device, threads) "
            "VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
            [
                spec.job_id,
                spec.study_id,
                spec.kind,
                spec.seed,
                tau,
                spec.hyper.epochs,
                spec.device,
                spec.threads,
            ],
        )


# -- advancing ---------------------------------------------------------------------------------------


def _job_states(store: Store, study_id: str, kind: str) -> list[str]:
    return [
        r[0] for r in store.rows("SELECT state FROM jobs WHERE study_id = ? AND kind = ?", [study_id, kind])
    ]


def advance(store: Store, study_id: str) -> str:
    """Move a study on when its current phase's jobs are all finished; return the (new) phase."""
    study = get_study(store, study_id)
    phase = study.phase
    if phase == "tuning" and _all_finished(_job_states(store, study_id, "tune")):
        temps = select_temperatures(store, study)
        info = get_dataset(store, study.dataset_id)
        specs = _final_jobs(store, study_id, study.preset, info.artifact_dir, temps)

        def go(con) -> None:
            con.execute(
                "UPDATE studies SET phase = 'training', temperatures = ? WHERE study_id = ?",
                [json.dumps(temps), study_id],
            )
            _insert_jobs(con, specs)

        store.write(go)
        phase = "training"
    if phase == "training" and _all_finished(_job_states(store, study_id, "final")):
        lock_study(store, study_id)
        phase = "locked"
    if phase == "locked":
        spec = evaluate_job(store, study_id)
        store.write(lambda con: _insert_jobs(con, [spec]))
        store.execute("UPDATE studies SET phase = 'evaluating' WHERE study_id = ?", [study_id])
        phase = "evaluating"
    if phase == "evaluating" and _all_finished(_job_states(store, study_id, "evaluate")):
        from hierconsole.audit import run_audits

        run_audits(store, study_id)
        store.execute("UPDATE studies SET phase = 'complete' WHERE study_id = ?", [study_id])
        phase = "complete"
    return phase


def _all_finished(states: list[str]) -> bool:
    return bool(states) and all(s == "finished" for s in states)


def select_temperatures(store: Store, study: StudyInfo) -> dict[str, float]:
    """Winner per tuned geometry by validation mean hierarchy mAP at the budget's last epoch.

    Ties go to the smaller temperature so the choice never depends on row order.
    """
    preset = study.preset
    epochs = preset.temperature.tuning.epochs
    agg = preset.evaluation.aggregation
    rows = store.dicts(
        "SELECT r.geometry, r.tau, "
        "max(v.value) FILTER (WHERE v.level = 'middle') AS middle_mAP, "
        "max(v.value) FILTER (WHERE v.level = 'high') AS high_mAP "
        "FROM runs r JOIN val_metrics v USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = 'tune' AND v.epoch = ? AND v.aggregation = ? AND v.metric = 'mAP' "
        "GROUP BY r.geometry, r.tau",
        [study.study_id, epochs, agg],
    )
    temps: dict[str, float] = {}
    table = []
    for geometry in ("euclidean", "poincare"):
        fixed = preset.temperature.for_geometry(geometry)
        if fixed != TUNE:
            temps[geometry] = float(fixed)
            continue
        cands = [r for r in rows if r["geometry"] == geometry]
        if not cands:
            raise HierconsoleError(f"study {study.study_id}: no tuning scores for {geometry}")
        for r in cands:
            r["score"] = float(np.mean([r["middle_mAP"], r["high_mAP"]]))
        ranked = sorted(cands, key=lambda r: (-r["score"], r["tau"]))
        temps[geometry] = float(ranked[0]["tau"])
        for i, r in enumerate(ranked):
            status = "winner" if i == 0 else "runner-up" if i == 1 else None
            table.append(
                [study.study_id, geometry, r["tau"], r["middle_mAP"], r["high_mAP"], r["score"], status]
            )

    def write(con) -> None:
        con.execute("DELETE FROM tuning WHERE study_id = ?", [study.study_id])
        if table:
            con.executemany("INSERT INTO tuning VALUES (?, ?, ?, ?, ?, ?, ?)", table)

    store.write(write)
    return temps


def lock_study(store: Store, study_id: str) -> str:
    """Freeze the study: the lock hash covers the preset, every split and every final model state."""
    study = get_study(store, study_id)
    states = _job_states(store, study_id, "final")
    if not _all_finished(states):
        raise SealError(f"study {study_id} cannot be locked: final jobs are {sorted(set(states))}")
    runs = store.rows(
        "SELECT run_id, final_sha256 FROM runs WHERE study_id = ? AND kind = 'final' ORDER BY run_id",
        [study_id],
    )
    if any(sha is None for _, sha in runs):
        raise SealError(f"study {study_id} cannot be locked: a final run has no recorded final state")
    splits = store.rows("SELECT role, sha256 FROM splits WHERE study_id = ? ORDER BY role", [study_id])
    h = hashlib.sha256(study.preset_sha256.encode())
    for role, sha in splits:
        h.update(f"{role}={sha}".encode())
    for run_id, sha in runs:
        h.update(f"{run_id}={sha}".encode())
    digest = h.hexdigest()
    store.execute(
        "UPDATE studies SET phase = 'locked', locked_at = current_timestamp, lock_sha256 = ? WHERE study_id = ?",
        [digest, study_id],
    )
    return digest


def evaluate_job(
    store: Store, study_id: str, *, aggregation: str | None = None, rescore: bool = False
) -> JobSpec:
    """The job that reads the official test split. Refused before the lock; records the first read."""
    study = get_study(store, study_id)
    if study.locked_at is None:
        raise SealError(
            f"study {study_id} is not locked (phase {study.phase}): official-test metrics exist only after "
            "every final run has finished and the study is locked"
        )
    info = get_dataset(store, study.dataset_id)
    preset = study.preset
    finals = [
        r[0]
        for r in store.rows(
            "SELECT job_id FROM jobs WHERE study_id = ? AND kind = 'final' ORDER BY seed", [study_id]
        )
    ]
    kind = "rescore" if rescore else "evaluate"
    agg = aggregation or preset.evaluation.aggregation
    job_id = f"{study_id}/{kind}-{agg}" if rescore else f"{study_id}/evaluate"
    spec = _base_spec(store, study_id, preset, info.artifact_dir, job_id, kind, 0, (), 0)
    spec = _with(
        spec,
        aggregation=agg,
        splits={f"qg:{s}": _split_path(store, study_id, f"qg:{s}") for s in preset.evaluation.qg_seeds},
        sources={j: str(job_dir(store, j)) for j in finals},
        out_dir=str(job_dir(store, job_id)),
        embeddings_dir=str(job_dir(store, f"{study_id}/evaluate") / "embeddings") if rescore else None,
    )
    store.execute(
        "UPDATE studies SET test_first_read_at = coalesce(test_first_read_at, current_timestamp) "
        "WHERE study_id = ?",
        [study_id],
    )
    return spec


def delete_study(store: Store, study_id: str) -> None:
    """Remove a study's rows and artifacts. Refused while any of its jobs is queued or running."""
    get_study(store, study_id)
    active = store.one(
        "SELECT count(*) FROM jobs WHERE study_id = ? AND state IN ('queued', 'running')", [study_id]
    )[0]
    if active:
        raise HierconsoleError(f"study {study_id} has {active} queued or running jobs; cancel them first")

    def delete(con) -> None:
        con.execute("DELETE FROM epochs WHERE run_id IN (SELECT run_id FROM runs WHERE study_id = ?)", [study_id])
        con.execute(
            "DELETE FROM val_metrics WHERE run_id IN (SELECT run_id FROM runs WHERE study_id = ?)", [study_id]
        )
        con.execute("DELETE FROM events WHERE job_id IN (SELECT job_id FROM jobs WHERE study_id = ?)", [study_id])
        for table in ("metrics", "audits", "tuning", "splits", "runs", "jobs", "studies"):
            con.execute(f"DELETE FROM {table} WHERE study_id = ?", [study_id])

    store.write(delete)
    shutil.rmtree(study_dir(store, study_id), ignore_errors=True)
