"""`hierconsole doctor`: what is wrong with a home's store, and the rebuild of a damaged one.

The checks read the store in full (every table), compare it with what the job folders hold (each event
log's events against the events stored for its job, each checkpoint against its SHA256 sidecar, each job
folder against a job row) and name the jobs left running with no orchestrator (orphaned).

The rebuild starts from the newest backup (`db.backups`), the last consistent state, and brings it up to
date from the job folders with the orchestrator's own start-up recovery (`Orchestrator.recover`): every
job the backup shows unfinished, whose folder has a log, is replayed through `ingest` exactly as a
restarted orchestrator would replay it, takes the state its last event says, and moves its study on
(`advance`, which creates the next phase's jobs, lock and audits as the original run did); repeated until
nothing moves. It is written to a new file; the damaged store is kept aside, never overwritten.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.contract.durable import recorded_hash
from hierconsole.contract.liveness import pid_alive
from hierconsole.errors import HierconsoleError, StoreDamagedError
from hierconsole.locations import db_path, job_dir
from hierconsole.study.db import backups
from hierconsole.study.db.storage import SCHEMA_VERSION, Store
from hierconsole.vocabulary import JobState, Phase

OK = "ok"
PROBLEM = "problem"


@dataclass(frozen=True)
class Finding:
    check: str
    status: str
    """`OK` or `PROBLEM`."""
    detail: str


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)

    def add(self, check: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(check, OK if ok else PROBLEM, detail))

    @property
    def healthy(self) -> bool:
        return all(f.status == OK for f in self.findings)


def _job_folders(home: Path) -> dict[str, Path]:
    """Every job folder under the home, by job id (`<study>/<name>`)."""
    return {
        f"{spec.parent.parent.parent.name}/{spec.parent.name}": spec.parent
        for spec in sorted((home / "studies").glob(f"*/jobs/*/{layout.SPEC}"))
    }


def _logged_keys(folder: Path) -> set[str]:
    return {e.key for e in ev.read_events(folder / layout.EVENTS).events}


def check_checkpoints(folders: dict[str, Path]) -> list[str]:
    """Checkpoints whose bytes do not match their SHA256 sidecar (or have none)."""
    bad = []
    for folder in folders.values():
        for path in sorted((folder / layout.CHECKPOINTS).glob("*.pt")):
            if recorded_hash(path) != hashlib.sha256(path.read_bytes()).hexdigest():  # None: no sidecar
                bad.append(str(path))
    return bad


def examine(home: Path) -> Report:
    """Every check of the store under `home`; a damaged store is a finding, not an error."""
    report = Report()
    folders = _job_folders(home)
    skipped = backups.skipped(home)
    newest = backups.newest(home)
    report.add(
        "latest backup taken",
        skipped is None,
        f"not taken: {skipped}; the newest backup is {newest.name if newest else 'none'}: free space on the "
        f"home's disk"
        if skipped
        else (newest.name if newest else "none yet (taken at each study lock and every few minutes of writing)"),
    )
    try:
        store = Store(home, read_only=True)
    except StoreDamagedError as exc:
        report.add("store opens", False, str(exc))
        _folder_checks(report, folders)
        return report
    with store:
        report.add("store opens", True, store.source)
        version = store.value("SELECT value FROM meta WHERE key = 'schema_version'")
        report.add("schema version", int(version) == SCHEMA_VERSION, f"{version} (this hierconsole: {SCHEMA_VERSION})")
        counts: dict[str, int] = {}
        unreadable = []
        for table in store.table_names():
            try:
                counts[table] = store.scan_table(table)
            except StoreDamagedError as exc:
                unreadable.append(f"{table}: {exc}")
        keys = 0
        if not unreadable:
            try:  # what the commands' lookups by id read, which a table scan does not
                keys = store.scan_keys()
            except StoreDamagedError as exc:
                unreadable.append(f"an index of the primary keys: {exc}")
        report.add(
            "every table readable",
            not unreadable,
            "; ".join(unreadable)
            or f"{len(counts)} tables, {sum(counts.values())} rows, {keys} keys looked up through their indexes",
        )
        if unreadable:
            _folder_checks(report, folders)
            return report
        stored: dict[str, set[str]] = {}
        for job_id, key in store.rows("SELECT job_id, key FROM events"):
            stored.setdefault(job_id, set()).add(key)
        jobs = {r[0]: r[1:] for r in store.rows("SELECT job_id, state, pid, pid_start FROM jobs")}
    missing = {}
    for job_id, folder in folders.items():
        behind = _logged_keys(folder) - stored.get(job_id, set())
        if behind:
            missing[job_id] = len(behind)
    running_ingested = {j for j, (state, _, _) in jobs.items() if state == JobState.RUNNING}
    unexplained = {j: n for j, n in missing.items() if j not in running_ingested}
    report.add(
        "stored events match the event logs",
        not unexplained,
        ", ".join(f"{j}: {n} logged events not stored" for j, n in sorted(unexplained.items()))
        or f"{len(folders)} job folders",
    )
    _checkpoint_check(report, folders)
    unknown = sorted(set(folders) - set(jobs))
    report.add("every job folder has a job", not unknown, ", ".join(unknown) or f"{len(jobs)} jobs")
    orphaned = sorted(
        j for j, (state, pid, start) in jobs.items() if state == JobState.RUNNING and not (pid and pid_alive(pid, start))
    )
    report.add(
        "no orphaned jobs",
        not orphaned,
        f"{', '.join(orphaned)}: stored as running, no worker; `hierconsole resume` settles them"
        if orphaned
        else "none",
    )
    return report


def _checkpoint_check(report: Report, folders: dict[str, Path]) -> None:
    bad = check_checkpoints(folders)
    report.add("checkpoints match their hashes", not bad, ", ".join(bad) or "all")


def _folder_checks(report: Report, folders: dict[str, Path]) -> None:
    _checkpoint_check(report, folders)
    report.add("job folders", True, f"{len(folders)} (their event logs are what a repair replays)")


@dataclass(frozen=True)
class Repaired:
    rebuilt: Path
    """The store now in place."""
    damaged: Path | None
    """Where the damaged store was moved (None: there was no file)."""
    backup: Path
    replayed: int
    """Jobs brought up to date from their event logs."""
    lost: list[str]
    """Job folders whose study the backup does not know (created after it): not rebuilt."""


def repair(home: Path) -> Repaired:
    """Rebuild the store from the newest readable backup and the job folders; the damaged file aside."""
    target = db_path(home)
    source = _newest_readable_backup(home)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    building = home / f".hierconsole.rebuilding-{stamp}.duckdb"
    shutil.copyfile(source, building)
    try:
        with Store(home, path=building) as store:
            replayed = _bring_up_to_date(store)
            known = {r[0] for r in store.rows("SELECT study_id FROM studies")}
        lost = sorted(j for j in _job_folders(home) if j.split("/", 1)[0] not in known)
    except BaseException:
        building.unlink(missing_ok=True)
        building.with_name(building.name + ".wal").unlink(missing_ok=True)
        raise
    damaged = None
    if target.exists():
        damaged = home / f"hierconsole.damaged-{stamp}.duckdb"
        os.replace(target, damaged)
        wal = target.with_name(target.name + ".wal")
        if wal.exists():
            os.replace(wal, damaged.with_name(damaged.name + ".wal"))
    os.replace(building, target)
    return Repaired(target, damaged, source, replayed, lost)


def _newest_readable_backup(home: Path) -> Path:
    for copy in reversed(backups.listed(home)):
        try:
            with Store(home, path=copy, read_only=True) as store:
                store.verify_readable()
            return copy
        except HierconsoleError:
            continue
    raise HierconsoleError(
        f"no readable backup of the store under {backups.backup_dir(home)}: the studies' own rows (presets, "
        f"splits, datasets) are kept only in the store and its backups, so it cannot be rebuilt; the job "
        f"folders are untouched (restore a copy of the home from elsewhere, if there is one)"
    )


def _bring_up_to_date(store: Store) -> int:
    """Replay every unfinished job that has a log, settle it and move its study on; until nothing moves."""
    from hierconsole.study.run.lifecycle import advance
    from hierconsole.study.run.orchestrator import Orchestrator  # recovery is the orchestrator's

    orch = Orchestrator(store, warm=False)
    replayed: set[str] = set()
    try:
        while True:
            # A study whose jobs all ended before the backup was taken may stand at a step the original
            # run took after it (a lock's copy is taken before the evaluation job is created).
            for (study_id,) in store.rows(
                "SELECT study_id FROM studies WHERE phase <> ? ORDER BY created_at", [Phase.COMPLETE]
            ):
                advance(store, study_id)
            pending = [
                job_id
                for (job_id,) in store.rows(
                    "SELECT job_id FROM jobs WHERE state IN (?, ?) ORDER BY job_id",
                    [JobState.QUEUED, JobState.RUNNING],
                )
                if job_id not in replayed and (job_dir(store.home, job_id) / layout.EVENTS).exists()
            ]
            if not pending:
                return len(replayed)
            # As a restarted orchestrator finds them: running, with no worker (the pid is not ours).
            store.execute(
                "UPDATE jobs SET state = ?, pid = NULL, pid_start = NULL WHERE job_id IN (SELECT unnest(?))",
                [JobState.RUNNING, pending],
            )
            replayed.update(pending)
            orch.recover()
    finally:
        orch.close_executors()
