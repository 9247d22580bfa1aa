"""A study: one preset on one dataset, from split generation to locked, evaluated and audited.

Phases (`vocabulary.Phase`): tuning -> training -> locked -> evaluating -> complete. The official test
perturbations are written at creation (so their hashes are fixed before any training) but are handed to
a job only by `seal_for_scoring`, which refuses until the study is locked and records when the test was
first read.
"""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hierconsole.config.level_plan import resolve_plan
from hierconsole.config.preset import TUNE, Preset
from hierconsole.contract import layout
from hierconsole.contract.durable import write_atomically
from hierconsole.contract.jobspec import CellSpec, JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.datasets.splits import Split, strict_valid_counts
from hierconsole.errors import HierconsoleError, SealError
from hierconsole.locations import inside_home, job_dir, relative, resolve, study_dir, study_record
from hierconsole.study.analysis.audits.result import Check
from hierconsole.study.analysis.durations import Duration
from hierconsole.study.db import split_files
from hierconsole.study.db.catalog import get_dataset, study_levels
from hierconsole.study.db.records import StudyInfo, get_study
from hierconsole.study.db.storage import Store, study_level_rows
from hierconsole.study.db.views import sql_list
from hierconsole.study.read.audits import run_audits
from hierconsole.study.read.lock import arm_durations, current_lock_digest, stored_durations
from hierconsole.study.run import plan
from hierconsole.study.run.components import install_components
from hierconsole.study.run.drawn_splits import DrawnSplits, draw_splits
from hierconsole.taxonomy import development_shuffle
from hierconsole.vocabulary import (
    ACTIVE_STATES,
    MAP,
    Aggregation,
    JobKind,
    JobState,
    Phase,
    hier_score,
)

if TYPE_CHECKING:
    import duckdb  # write callbacks are handed a connection by Store.write; only study.db opens one


def new_study_id(preset: Preset) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{preset.name}-{stamp}-{secrets.token_hex(2)}"


def _paths(store: Store, study: StudyInfo) -> plan.StudyPaths:
    info = get_dataset(store, study.dataset_id)
    return plan.StudyPaths(store.home, study.study_id, info.artifact_dir, info.sha256)


# -- creation ----------------------------------------------------------------------------------------


def load_features(store: Store, dataset_id: str) -> FeatureSet:
    """A registered dataset's feature set, refused when it has no feature columns."""
    fs = FeatureSet.load(get_dataset(store, dataset_id).artifact_dir)
    if fs.dim < 1:
        raise HierconsoleError(f"dataset {dataset_id!r} has no feature columns")
    return fs


def study_splits(store: Store, preset: Preset, dataset_id: str) -> DrawnSplits:
    """The splits a study of `preset` on the dataset would have, drawn and checked, nothing written."""
    return draw_splits(preset, load_features(store, dataset_id), dataset_id)


def create_study(store: Store, preset: Preset, dataset_id: str, *, drawn: DrawnSplits | None = None) -> str:
    """Register a study: splits (with hashes and strict valid counts) and its first jobs. `drawn`: the
    splits `study_splits` drew for this preset and dataset (drawn here when not given)."""
    info = get_dataset(store, dataset_id)
    fs = FeatureSet.load(info.artifact_dir) if drawn is not None else load_features(store, dataset_id)
    labels = fs.labels
    if drawn is None:
        drawn = draw_splits(preset, fs, dataset_id)
    protocol, tuning, qgs, dev_idx = drawn.protocol, drawn.tuning, drawn.qgs, drawn.development

    study_id = new_study_id(preset)
    folder = study_dir(store.home, study_id)
    (folder / "splits").mkdir(parents=True, exist_ok=False)
    install_components(folder, preset)
    rows: list[list[Any]] = []

    def add(role: str, split: Split, valid: dict[str, int] | None, files: dict[str, np.ndarray]) -> None:
        path = split_files.split_file(store.home, study_id, role)
        split_files.save_split(path, files)
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
                relative(store.home, path),
            ]
        )

    tuning_valid = strict_valid_counts(labels, tuning.parts["query"], tuning.parts["gallery"], fs.taxonomy.levels)
    add(split_files.PROTOCOL, protocol, None, protocol.parts)
    add(split_files.FINAL_TRAIN, protocol, None, {"fit": dev_idx})
    add(split_files.TUNING, tuning, tuning_valid, tuning.parts)
    add(split_files.TUNE_TRAIN, tuning, None, {"fit": tuning.parts["fit"]})
    add(
        split_files.VAL,
        tuning,
        tuning_valid,
        {"query": tuning.parts["query"], "gallery": tuning.parts["gallery"]},
    )
    for s, qg in qgs.items():
        valid = strict_valid_counts(labels, qg.parts["query"], qg.parts["gallery"], fs.taxonomy.levels)
        add(split_files.qg_role(s), qg, valid, qg.parts)

    shuffle_row = _taxonomy_shuffle(store, study_id, preset, fs, labels[dev_idx, 0])
    # The plan is resolved once, here, and recorded: every later reader (the views, the analysis) reads it.
    level_rows = study_level_rows(study_id, resolve_plan(preset, info.levels))

    tuned = preset.tuned_geometries
    phase = Phase.TUNING if tuned else Phase.TRAINING
    temps = None if tuned else fixed_temperatures(preset)
    paths = plan.StudyPaths(store.home, study_id, info.artifact_dir, info.sha256)
    specs = plan.tune_jobs(paths, preset) if temps is None else plan.final_jobs(paths, preset, temps)

    study_row = {
        "study_id": study_id,
        "name": preset.name,
        "dataset_id": dataset_id,
        "preset": preset.canonical_json(),
        "preset_sha256": preset.sha256(),
        "phase": phase,
        "temperatures": json.dumps(temps) if temps is not None else None,
    }

    def insert(con: duckdb.DuckDBPyConnection) -> None:
        _insert_study_rows(con, study_row, rows, shuffle_row, level_rows)
        insert_jobs(con, store.home, specs)
        # Written inside the transaction: a failed write rolls the rows back (and the folder goes below),
        # and committed rows always have their record.
        created = con.execute("SELECT created_at FROM studies WHERE study_id = ?", [study_id]).fetchone()
        assert created is not None  # inserted just above
        record = {
            "format": RECORD_FORMAT,
            "study": {**study_row, "created_at": created[0].isoformat()},
            "splits": rows,
            "taxonomy_shuffle": shuffle_row,
            "jobs": [spec.job_id for spec in specs],
        }
        write_atomically(study_record(store.home, study_id), json.dumps(record, indent=1, default=_plain).encode())

    try:
        store.write(insert)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return study_id


RECORD_FORMAT = 2
"""The format of a study's record (`locations.study_record`). 2: a shuffle control's `taxonomy_shuffle`
is {"row", "edges"} (a row per edge); 1 held the three-level row alone, which is still read."""
STUDY_RECORD_COLUMNS = frozenset(
    {"study_id", "name", "dataset_id", "preset", "preset_sha256", "phase", "temperatures", "created_at"}
)
"""The `studies` columns a record holds: its keys become the insert's column names, so no other is taken."""


def check_record_columns(row: dict[str, Any], columns: frozenset[str], what: str) -> None:
    """Refuse a record's row whose keys are not the columns its creation writes (a damaged or hand-made
    record: its keys would be SQL)."""
    if not set(row) <= columns:
        raise HierconsoleError(f"its {what} row has columns this hierconsole never writes: {sorted(set(row) - columns)}")


def _plain(value: Any) -> Any:
    """A numpy scalar in a record as the Python number it holds."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _insert_study_rows(
    con: duckdb.DuckDBPyConnection,
    study: dict[str, Any],
    splits: list[list[Any]],
    shuffle: dict[str, Any] | list[Any] | None,
    levels: list[tuple[str, int, str, bool, bool]],
) -> None:
    """The rows a study's creation inserts besides its jobs: its own, its splits', its level plan's and its
    shuffled taxonomy's (a record's `taxonomy_shuffle`: {"row", "edges"}, or the one row of an older one)."""
    check_record_columns(study, STUDY_RECORD_COLUMNS, "study")
    con.execute(
        f"INSERT INTO studies ({', '.join(study)}) VALUES ({', '.join('?' * len(study))})", list(study.values())
    )
    con.executemany("INSERT INTO splits VALUES (?, ?, ?, ?, ?, ?, ?, ?)", splits)
    con.executemany("INSERT INTO study_levels VALUES (?, ?, ?, ?, ?)", levels)
    if shuffle is None:
        return
    if isinstance(shuffle, list):
        shuffle = _three_level_shuffle(shuffle)
    con.execute("INSERT INTO taxonomy_shuffles VALUES (?, ?, ?, ?)", shuffle["row"])
    con.executemany("INSERT INTO taxonomy_shuffle_edges VALUES (?, ?, ?, ?, ?, ?, ?)", shuffle["edges"])


def _three_level_shuffle(row: list[Any]) -> dict[str, Any]:
    """The record of a shuffle as a hierconsole before store version 7 wrote it (one row of twelve
    columns, three levels), in this version's form."""
    sid, seed, sha256, leaf_middle, middle_high, dev_leaves, dev_middles, leaf_fixed, leaf_min, *rest = row
    middle_fixed, middle_min, path = rest
    return {
        "row": [sid, seed, sha256, path],
        "edges": [
            [sid, 1, "leaf_middle", leaf_middle, dev_leaves, leaf_fixed, leaf_min],
            [sid, 2, "middle_high", middle_high, dev_middles, middle_fixed, middle_min],
        ],
    }


def recorded_study(home: Path, study_id: str) -> dict[str, Any] | None:
    """A study's record as its creation wrote it; None when its folder holds none (an older hierconsole
    created it). Raises HierconsoleError when the file cannot be read as one."""
    path = study_record(home, study_id)
    if not path.exists():
        return None
    return read_record(path, RECORD_FORMAT, "study")


def read_record(path: Path, fmt: int, what: str) -> dict[str, Any]:
    """A creation record (a study's, a family's) of format 1 to `fmt`, its `what` row's `created_at` parsed;
    one that cannot be read as one is a HierconsoleError naming the file."""
    try:
        record = json.loads(path.read_text())
        if record.get("format") not in range(1, fmt + 1):
            raise ValueError(f"format {record.get('format')!r}, this hierconsole reads 1 to {fmt}")
        record[what]["created_at"] = datetime.fromisoformat(record[what]["created_at"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise HierconsoleError(f"{path}: not a readable {what} record ({exc})") from None
    return record


def restore_study(store: Store, record: dict[str, Any]) -> None:
    """Insert a study's creation rows and first jobs as its record has them: a store rebuilt from a backup
    taken before the study was created has none of them (`doctor --repair`, whose replay of the job
    folders' event logs then brings the study up to date)."""
    specs = [JobSpec.read(layout.spec_path(job_dir(store.home, job_id))) for job_id in record["jobs"]]
    study = record["study"]
    # The record holds the preset, and the plan is a function of it and the dataset's levels (the dataset's
    # rows are restored before its studies').
    preset = Preset.from_dict(json.loads(study["preset"]), source=f"study {study['study_id']}", recorded=True)
    levels = study_level_rows(study["study_id"], resolve_plan(preset, get_dataset(store, study["dataset_id"]).levels))

    def insert(con: duckdb.DuckDBPyConnection) -> None:
        _insert_study_rows(con, study, record["splits"], record["taxonomy_shuffle"], levels)
        insert_jobs(con, store.home, specs)

    store.write(insert)


def _taxonomy_shuffle(
    store: Store, study_id: str, preset: Preset, fs: FeatureSet, dev_leaf_labels: np.ndarray
) -> dict[str, Any] | None:
    """The shuffle control's training taxonomy, written beside the splits; its `taxonomy_shuffles` row and
    one `taxonomy_shuffle_edges` row per edge, fine to coarse ({"row", "edges"}).

    Computed from the development leaves only, so test-only groups never move (paper S9)."""
    controls = preset.controls
    if not controls.taxonomy_shuffle:
        return None
    shuffle = development_shuffle(fs.taxonomy, dev_leaf_labels, controls.shuffle_seed)
    path = split_files.split_file(store.home, study_id, split_files.TRAIN_TAXONOMY)
    tax = shuffle.taxonomy
    levels = fs.taxonomy.levels
    # One array per edge under its edge key: three levels keep the file (leaf_middle, middle_high) byte for byte.
    split_files.save_split(path, {levels.edge_key(k): parents for k, parents in enumerate(tax.parents)})
    edges = [
        [study_id, k + 1, levels.edge_key(k), json.dumps(parents.tolist()), len(dev), fixed, fixed_min]
        for k, (parents, dev, fixed, fixed_min) in enumerate(
            zip(tax.parents, shuffle.dev_nodes, shuffle.fixed, shuffle.fixed_min, strict=True)
        )
    ]
    return {"row": [study_id, shuffle.seed, shuffle.sha256, relative(store.home, path)], "edges": edges}


def fixed_temperatures(preset: Preset) -> dict[str, float]:
    """The temperatures fixed by the preset; a geometry left to `tune` without a SupCon cell to tune
    has none (it trains no SupCon cell)."""
    return {
        g.name: float(tau)
        for g in preset.factorial.geometry_components
        if (tau := preset.temperature.for_geometry(g.name)) not in (TUNE, None)
    }


def insert_jobs(con: duckdb.DuckDBPyConnection, home: Path, specs: list[JobSpec]) -> None:
    """Write each job's spec into its folder and queue it."""
    for spec in specs:
        spec.write(layout.spec_path(resolve(home, spec.out_dir)))
        tau = spec.cells[0].tau if spec.kind == JobKind.TUNE and spec.cells else None
        con.execute(
            "INSERT INTO jobs (job_id, study_id, kind, seed, tau, state, epochs_total, device, threads) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                spec.job_id,
                spec.study_id,
                spec.kind,
                spec.seed,
                tau,
                JobState.QUEUED,
                spec.epochs,
                spec.device,
                spec.threads,
            ],
        )


# -- advancing ---------------------------------------------------------------------------------------


def _job_states(store: Store, study_id: str, kind: JobKind) -> list[str]:
    return [
        r[0] for r in store.rows("SELECT state FROM jobs WHERE study_id = ? AND kind = ?", [study_id, kind])
    ]


def _all_finished(states: list[str]) -> bool:
    return bool(states) and all(s == JobState.FINISHED for s in states)


def advance(store: Store, study_id: str) -> Phase:
    """Move a study on when its current phase's jobs are all finished; return the (new) phase."""
    study = get_study(store, study_id)
    phase = study.phase
    if phase == Phase.TUNING and _all_finished(_job_states(store, study_id, JobKind.TUNE)):
        temps = select_temperatures(store, study)
        specs = plan.final_jobs(_paths(store, study), study.preset, temps)

        def go(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                "UPDATE studies SET phase = ?, temperatures = ? WHERE study_id = ?",
                [Phase.TRAINING, json.dumps(temps), study_id],
            )
            insert_jobs(con, store.home, specs)

        store.write(go)
        phase = Phase.TRAINING
    if phase == Phase.TRAINING and _all_finished(_job_states(store, study_id, JobKind.FINAL)):
        lock_study(store, study_id)
        phase = Phase.LOCKED
    if phase == Phase.LOCKED:
        spec = seal_for_scoring(store, study_id)
        store.write(lambda con: insert_jobs(con, store.home, [spec]))
        store.execute("UPDATE studies SET phase = ? WHERE study_id = ?", [Phase.EVALUATING, study_id])
        phase = Phase.EVALUATING
    if phase == Phase.EVALUATING and _all_finished(_job_states(store, study_id, JobKind.EVALUATE)):
        record_audits(store, study_id, run_audits(store, study_id))
        store.execute("UPDATE studies SET phase = ? WHERE study_id = ?", [Phase.COMPLETE, study_id])
        phase = Phase.COMPLETE
    return phase


def record_audits(store: Store, study_id: str, checks: Iterable[Check]) -> None:
    """Store the checks' results (replacing earlier ones of the same name)."""
    checks = list(checks)

    def write(con: duckdb.DuckDBPyConnection) -> None:
        for c in checks:
            con.execute(
                "INSERT OR REPLACE INTO audits (study_id, check_name, ok, evidence) VALUES (?, ?, ?, ?)",
                [study_id, c.name, c.ok, c.evidence],
            )

    store.write(write)


def select_temperatures(store: Store, study: StudyInfo) -> dict[str, float]:
    """Winner per tuned geometry by validation hier score at the budget's last epoch.

    Ties go to the smaller temperature so the choice never depends on row order.
    """
    preset = study.preset
    hier = study_levels(store, study.study_id).hier
    scores: dict[tuple[str, float], dict[str, float | None]] = {}
    for geometry, tau, level, value in store.rows(
        "SELECT r.geometry, r.tau, v.level, v.value FROM runs r JOIN val_metrics v USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? AND v.epoch = ? AND v.aggregation = ? AND v.metric = ?",
        [study.study_id, JobKind.TUNE, preset.temperature.tuning.epochs, preset.evaluation.aggregation, MAP],
    ):
        scores.setdefault((geometry, tau), {})[level] = value
    temps = fixed_temperatures(preset)
    table: list[list[Any]] = []
    level_table: list[list[Any]] = []
    for geometry in preset.tuned_geometries:
        cands = [(tau, levels, hier_score(levels, hier)) for (g, tau), levels in scores.items() if g == geometry]
        if not cands:
            raise HierconsoleError(f"study {study.study_id}: no tuning scores for {geometry}")
        ranked = sorted(cands, key=lambda c: (-c[2], c[0]))
        temps[geometry] = float(ranked[0][0])
        for i, (tau, levels, score) in enumerate(ranked):
            status = "winner" if i == 0 else "runner-up" if i == 1 else None
            table.append([study.study_id, geometry, tau, score, status])
            # Each hier level's mAP beside the score it makes (null: no valid query at that level).
            level_table.extend([study.study_id, geometry, tau, lv, levels.get(lv)] for lv in hier)

    def write(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("DELETE FROM tuning WHERE study_id = ?", [study.study_id])
        con.execute("DELETE FROM tuning_levels WHERE study_id = ?", [study.study_id])
        if table:
            con.executemany("INSERT INTO tuning VALUES (?, ?, ?, ?, ?)", table)
            con.executemany("INSERT INTO tuning_levels VALUES (?, ?, ?, ?, ?)", level_table)

    store.write(write)
    return temps


def lock_study(store: Store, study_id: str) -> str:
    """Freeze the study: a study that selects its epoch freezes each arm's duration here, and the lock hash
    (`analysis.lock.lock_digest`, over `read.lock.lock_inputs`) covers the preset, every split, every final model state and what test
    will score."""
    study = get_study(store, study_id)
    states = _job_states(store, study_id, JobKind.FINAL)
    if not _all_finished(states):
        raise SealError(f"study {study_id} cannot be locked: final jobs are {sorted(set(states))}")
    durations: dict[str, Duration] = {}
    if study.preset.training.select_epoch:
        # Every seed has finished: each arm's duration is frozen now from all its seeds' validation curves,
        # and the checkpoints test will score (one epoch per arm, every seed) are frozen with it.
        durations, unfrozen = arm_durations(store, study_id, study.preset)
        if unfrozen:
            raise SealError(f"study {study_id} cannot be locked: no duration can be frozen for {'; '.join(unfrozen)}")
    digest, missing = current_lock_digest(
        store, study_id, study.preset, study.preset_sha256, {arm: d.epoch for arm, d in durations.items()}
    )
    if missing:
        raise SealError(f"study {study_id} cannot be locked: {'; '.join(missing)}")

    def write(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("DELETE FROM arm_durations WHERE study_id = ?", [study_id])
        if durations:
            con.executemany(
                "INSERT INTO arm_durations VALUES (?, ?, ?, ?, ?)",
                [(study_id, d.arm, d.epoch, d.score, d.seeds) for d in durations.values()],
            )
        con.execute(
            "UPDATE studies SET phase = ?, locked_at = current_timestamp, lock_sha256 = ? WHERE study_id = ?",
            [Phase.LOCKED, digest, study_id],
        )

    store.write(write)
    store.request_backup()  # the state every later result depends on: a copy of it is kept
    if durations:
        _prune_candidates(store, study.preset, study_id, {arm: d.epoch for arm, d in durations.items()})
    return digest


def _prune_candidates(store: Store, preset: Preset, study_id: str, durations: dict[str, int]) -> None:
    """Delete each final run's candidate models at the epochs its arm was not frozen at: once the lock is
    written nothing reads them (test scores the frozen epoch's, the lock hash covers only those, the
    validation curves are in the store), and at the paper's sizes they are most of a study's disk (about
    1.5 GB for the semantic control). Done after the lock's write, so a lock that failed deletes nothing
    (a kill midway leaves some of them: harmless, only disk)."""
    for job_id, arm in store.rows(
        "SELECT DISTINCT job_id, arm FROM runs WHERE study_id = ? AND kind = ?", [study_id, JobKind.FINAL]
    ):
        if arm not in durations:
            continue
        cell = CellSpec.in_preset(preset, arm)
        keep = layout.candidate_model(cell, durations[arm])
        for path in job_dir(store.home, job_id).glob(layout.candidate_models(cell)):
            if path.name != keep:
                path.unlink(missing_ok=True)


def seal_for_scoring(store: Store, study_id: str, *, rescore: Aggregation | None = None) -> JobSpec:
    """The job that reads the official test split (`rescore`: re-scores the stored embeddings under that
    aggregation). Refused before the lock; records when the test was first read."""
    study = get_study(store, study_id)
    if study.locked_at is None or study.temperatures is None:
        raise SealError(
            f"study {study_id} is not locked (phase {study.phase}): official-test metrics exist only after "
            "every final run has finished and the study is locked"
        )
    durations = {arm: d.epoch for arm, d in stored_durations(store, study_id).items()}
    spec = plan.scoring_job(_paths(store, study), study.preset, study.temperatures, rescore=rescore, durations=durations)
    store.execute(
        "UPDATE studies SET test_first_read_at = coalesce(test_first_read_at, current_timestamp) "
        "WHERE study_id = ?",
        [study_id],
    )
    return spec


def delete_study(store: Store, study_id: str) -> None:
    """Remove a study's rows and artifacts. Refused while any of its jobs is queued or running, and when
    its folder would be outside the home (a crafted or damaged row), before any row is deleted."""
    get_study(store, study_id)
    folder = inside_home(store.home, study_dir(store.home, study_id), f"study {study_id}")
    active = store.value(
        f"SELECT count(*) FROM jobs WHERE study_id = ? AND state IN ({sql_list(ACTIVE_STATES)})", [study_id]
    )
    if active:
        raise HierconsoleError(f"study {study_id} has {active} queued or running jobs; cancel them first")

    def delete(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(
            "DELETE FROM epochs WHERE run_id IN (SELECT run_id FROM runs WHERE study_id = ?)", [study_id]
        )
        con.execute(
            "DELETE FROM val_metrics WHERE run_id IN (SELECT run_id FROM runs WHERE study_id = ?)", [study_id]
        )
        con.execute(
            "DELETE FROM events WHERE job_id IN (SELECT job_id FROM jobs WHERE study_id = ?)", [study_id]
        )
        tables = (
            "metrics", "audits", "tuning", "tuning_levels", "arm_durations", "splits", "taxonomy_shuffles",
            "taxonomy_shuffle_edges", "study_levels", "family_members", "runs", "jobs", "studies",
        )  # fmt: skip
        for table in tables:
            con.execute(f"DELETE FROM {table} WHERE study_id = ?", [study_id])

    store.write(delete)
    shutil.rmtree(folder, ignore_errors=True)
