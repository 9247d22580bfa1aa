"""`hierconsole doctor`: what is wrong with a home's store, and the rebuild of a damaged one.

The checks read the store in full (every table), compare it with what the job folders hold (each event
log's events against the events stored for its job, each checkpoint against its SHA256 sidecar, each job
folder against a job row) and name the jobs left running with no orchestrator (orphaned).

A repair refuses while another process holds the store (it would go on writing the file replaced under
it), and leaves a store whose file checks sound alone unless forced (a rebuild could only lose what the
backup lacks; a forced one says first what that is). The rebuild starts from the newest backup
(`db.backups`) that reads in full and replays (older ones are tried past a damaged one), the last
consistent state; re-inserts what the home records and the backup lacks (a dataset registered after it,
from its self-contained folder; a study created after it, from the record its creation wrote beside its
splits, with its first jobs); and brings it up to date from the job folders with the orchestrator's own
start-up recovery (`Orchestrator.recover`): every job the backup shows unfinished, whose folder has a log,
is replayed through `ingest` exactly as a restarted orchestrator would replay it, takes the state its last
event says, and moves its study on (`advance`, which creates the next phase's jobs, lock and audits as the
original run did); repeated until nothing moves. It is written to a new file; the damaged store is kept
aside, never overwritten.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.contract.durable import fsync_dir, recorded_hash
from hierconsole.contract.liveness import pid_alive
from hierconsole.errors import HierconsoleError, StoreBusyError, StoreDamagedError, StoreNeedsUpgradeError
from hierconsole.locations import db_path, job_dir, wal_path
from hierconsole.study.db import backups
from hierconsole.study.db.catalog import restore_dataset
from hierconsole.study.db.storage import SCHEMA_VERSION, Store, kept_from_writers
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


STORE_CHECKS = ("store opens", "schema version", "every table readable")
"""The checks of the store file itself; the others compare it with the job folders. A repair rebuilds
only a store one of these finds damaged (or a missing one): a rebuild of a sound store would only lose
what its backup lacks."""


def store_damage(home: Path) -> str | None:
    """What is wrong with the store file, or None when it opens, has this version's schema and every
    table reads in full."""
    if not db_path(home).exists():
        return f"the store {db_path(home)} is missing"
    try:
        with Store(home, read_only=True):
            pass
    except StoreNeedsUpgradeError:
        return None  # sound, of an older schema: the next writing command brings it up, as it always did
    except HierconsoleError:
        pass  # said by the checks below
    problems = [
        f"{f.check}: {f.detail}"
        for f in examine(home).findings
        if f.check in STORE_CHECKS and f.status == PROBLEM
    ]
    return "; ".join(problems) or None


@dataclass(frozen=True)
class Untouched:
    """A repair that found the store sound and did nothing."""

    store: Path


@dataclass(frozen=True)
class Rebuild:
    """A rebuilt store, not yet in place: what it was built from and what it lacks."""

    backup: Path
    skipped: list[str]
    """One note per newer backup passed over (damaged, or failing in the replay), naming it and why."""
    replayed: int
    """Jobs brought up to date from their event logs."""
    restored: list[str]
    """Studies (and datasets) the backup lacks, re-inserted from their records (created after it)."""
    lost: list[str]
    """Study folders the rebuilt store lacks and cannot get: no record (an older hierconsole's), or one
    that cannot be read; each with why."""
    drops: list[str] | None
    """What the rebuilt store lacks that the current one holds (a forced rebuild of a sound store); None
    when the current store cannot be read to tell."""


@dataclass(frozen=True)
class Repaired:
    rebuilt: Path
    """The store now in place."""
    damaged: Path | None
    """Where the damaged (or, forced, the replaced) store was moved (None: there was no file)."""
    done: Rebuild


BUSY = (
    "a repair replaces the store file, which that process would go on writing (its results would be "
    "lost); let it end, or stop it (or close that console), then repair again; nothing was changed"
)


def repair(
    home: Path, *, force: bool = False, announce: Callable[[Rebuild], None] | None = None
) -> Repaired | Untouched:
    """Rebuild a damaged store from the newest usable backup, the study records and the job folders; the
    damaged file kept aside. Refused (StoreBusyError) while another process holds the store; a store
    that checks sound is left alone unless `force`. `announce` is told what the rebuilt store holds and
    lacks before it replaces the current one."""
    target = db_path(home)
    with kept_from_writers(home, BUSY):
        if store_damage(home) is None and not force:
            return Untouched(target)
        # A missing store cannot be held against writers: one that appears meanwhile is a `run` or a console
        # started during the repair, whose work must not be moved aside as if it were the damaged store.
        missing = not target.exists()
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        building = home / f".hierconsole.rebuilding-{stamp}.duckdb"
        try:
            rebuild = _rebuild(home, building)
            if announce is not None:
                announce(rebuild)
            if missing and target.exists():
                raise StoreBusyError(
                    f"the store {target} was created while the repair ran, by a hierconsole started meanwhile: "
                    f"{BUSY}"
                )
        except BaseException:
            _remove_store_file(building)
            raise
        damaged = None
        if target.exists():
            damaged = home / f"hierconsole.damaged-{stamp}.duckdb"
            os.replace(target, damaged)
            wal = wal_path(target)
            if wal.exists():
                os.replace(wal, wal_path(damaged))
        os.replace(building, target)
        fsync_dir(home)
    return Repaired(target, damaged, rebuild)


def _remove_store_file(path: Path) -> None:
    path.unlink(missing_ok=True)
    wal_path(path).unlink(missing_ok=True)


def _rebuild(home: Path, building: Path) -> Rebuild:
    """The store rebuilt into `building` from the newest backup that reads in full and replays; each newer
    one passed over with a note saying why (garbled, truncated, failing mid-replay)."""
    skipped = []
    for copy in reversed(backups.listed(home)):
        _remove_store_file(building)
        try:
            shutil.copyfile(copy, building)  # an unreadable backup (EIO, no room for the copy) is skipped too
            with Store(home, path=building) as store:
                store.verify_readable()
                restored, lost = _restore_records(store)
                replayed = _bring_up_to_date(store)
        except Exception as exc:  # noqa: BLE001 - any failure of a copy is the copy's: the next older one is tried
            skipped.append(f"skipped the backup {copy}: {_why(exc)}")
            continue
        drops = _drops(home, building)
        return Rebuild(copy, skipped, replayed, restored, lost, drops)
    _remove_store_file(building)
    tried = f" ({'; '.join(skipped)})" if skipped else ""
    raise HierconsoleError(
        f"no readable backup of the store under {backups.backup_dir(home)}{tried}: the studies' own rows "
        f"(presets, splits, datasets) of studies created before a backup are kept only in the store and its "
        f"backups, so it cannot be rebuilt; the job folders are untouched (restore a copy of the home from "
        f"elsewhere, if there is one)"
    )


def _why(exc: BaseException) -> str:
    if isinstance(exc, StoreDamagedError):
        return exc.reason
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _restore_records(store: Store) -> tuple[list[str], list[str]]:
    """Re-insert what the backup lacks and the home records: each dataset folder's rows, then each study's
    creation rows and first jobs from its record, oldest first. (restored, lost)."""
    from hierconsole.study.run.families import recorded_families, restore_family
    from hierconsole.study.run.lifecycle import recorded_study, restore_study

    home = store.home
    restored, lost = [], []
    datasets = {r[0] for r in store.rows("SELECT dataset_id FROM datasets")}
    for folder in sorted((home / "datasets").glob("*/manifest.json")):
        if folder.parent.name not in datasets and not folder.parent.name.startswith("."):
            try:
                restored.append(f"dataset {restore_dataset(store, folder.parent)}")
            except Exception as exc:  # noqa: BLE001 - a folder that cannot be restored is its own loss, not the backup's
                lost.append(f"dataset {folder.parent.name} ({_why(exc)})")
    known = {r[0] for r in store.rows("SELECT study_id FROM studies")}
    records = []
    for folder in sorted(p for p in (home / "studies").glob("*") if p.is_dir() and p.name not in known):
        try:
            record = recorded_study(home, folder.name)
        except HierconsoleError as exc:
            lost.append(f"{folder.name} ({exc})")
            continue
        if record is None:
            lost.append(f"{folder.name} (no record of its creation in its folder: an older hierconsole created it)")
        else:
            records.append({**record, "folder": folder.name})
    for record in sorted(records, key=lambda r: r["study"]["created_at"]):
        study_id = record["study"].get("study_id")
        try:
            if study_id not in known and study_id == record["folder"]:
                restore_study(store, record)
            else:  # a record copied into another study's folder must not restore that other study
                raise HierconsoleError(f"its record names the study {study_id!r}, not its folder's")
        except Exception as exc:  # noqa: BLE001 - one study's damaged record is that study's loss, never the
            # backup's: every older backup lacks the same study, and would fail the same way
            lost.append(f"{record['folder']} ({_why(exc)})")
            continue
        restored.append(study_id)
    families, families_lost = recorded_families(store)
    lost += families_lost
    for family, members in families:
        try:
            restore_family(store, family, members)
        except Exception as exc:  # noqa: BLE001 - one family's damaged record is its own loss, not the backup's
            lost.append(f"family {family['family_id']} ({_why(exc)})")
            continue
        restored.append(f"family {family['family_id']}")
    return restored, lost


def _drops(home: Path, building: Path) -> list[str] | None:
    """What the store at `building` lacks that the home's current store holds: studies and datasets by
    id, and the tables with fewer rows; None when the current store is missing or cannot be read."""
    if not db_path(home).exists():
        return None
    keys = {"studies": "study_id", "datasets": "dataset_id"}
    try:
        with Store(home, read_only=True) as current:
            now = current.verify_readable()
            ids = {t: {r[0] for r in current.rows(f"SELECT {key} FROM {t}")} for t, key in keys.items()}
    except HierconsoleError:
        return None
    with Store(home, path=building, read_only=True) as rebuilt:
        then = rebuilt.verify_readable()
        kept = {t: {r[0] for r in rebuilt.rows(f"SELECT {key} FROM {t}")} for t, key in keys.items()}
    drops = [f"{t} {', '.join(sorted(ids[t] - kept[t]))}" for t in ids if ids[t] - kept[t]]
    drops += [
        f"{now[t] - then.get(t, 0)} of the {now[t]} rows of {t}"
        for t in sorted(now)
        if then.get(t, 0) < now[t] and t not in keys  # those named by id above
    ]
    return drops


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
