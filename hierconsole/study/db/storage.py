"""The DuckDB store: one file per home folder, one writer thread per process.

DuckDB lets exactly one process open a database file for writing, and not even a read-only second
opener is allowed while it does. So the process that opens the store for writing (the console, `run`,
`resume`) is the only one that touches it: worker processes talk to it through events. Inside that
process a DuckDB connection is not thread-safe, so every write goes through one writer thread (which
also lets many small event writes be batched into one transaction), and each reading thread gets its
own cursor.

Read commands open the store read-only and never write to it, so an archived read-only home can be
listed, exported and audited. While another process holds the store, they read the *live snapshot*
the holder publishes (`live.py`): a consistent copy, refreshed every couple of seconds while it writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from hierconsole.contract import layout
from hierconsole.errors import (
    HierconsoleError,
    StoreBusyError,
    StoreDamagedError,
    StoreNeedsUpgradeError,
    StoreReadOnlyError,
    StoreWriteError,
)
from hierconsole.levels import PAPER_LEVELS, LevelPlan, Levels
from hierconsole.locations import db_path, resolve_home, resource_dir
from hierconsole.study.db import backups, live
from hierconsole.study.db.views import views_sql

if TYPE_CHECKING:
    import polars as pl  # imported by frame() when called: a read that lists rows never loads polars

T = TypeVar("T")

SCHEMA_VERSION = 8
VIEWS_KEY = "views_sha256"
"""meta key: the hash of the views last created, so they are re-created only when this version's differ."""


def _apply_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute((resource_dir("store") / "schema.sql").read_text())


def _add_executor_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Version 3: each job records the executor and the node of its last attempt."""
    con.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS executor VARCHAR")
    con.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS node VARCHAR")


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    return {r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND table_schema = 'main' "
        "AND table_catalog = current_database()",
        [table],
    ).fetchall()}  # fmt: skip


# The three-level columns of version 6 (and earlier), as they were spelled then: the migration to version
# 7 reads them once and drops them. Versions up to 6 stored three levels only, with the paper's codes.
_V6_EDGES = (  # edge, its parent map, development children, fixed points, their minimum (child position)
    (1, "leaf_middle", "dev_leaves", "leaf_fixed", "leaf_min"),
    (2, "middle_high", "dev_middles", "middle_fixed", "middle_min"),
)


def _k_levels(con: duckdb.DuckDBPyConnection) -> None:
    """Version 7: levels of any depth. The three-level columns become rows: a dataset's levels
    (`dataset_levels`), its taxonomy's paths (`taxonomy_nodes.path`), each study's level plan
    (`study_levels`: every level trained, the hier score over the levels above the leaf, as every study
    before this version had), the tuning candidates' hier-level mAP (`tuning_levels`) and a shuffle
    control's edges (`taxonomy_shuffle_edges`). No metric, hash or study row changes.

    Each step looks at the columns first: the migrations of versions 1 and 3-5 re-apply the current
    schema.sql, so a store from before a table existed already has it in this version's shape."""
    _apply_schema(con)  # the new tables
    paper = PAPER_LEVELS
    if {"n_middle", "n_high"} <= _columns(con, "datasets"):
        counts = ("n_leaf", "n_middle", "n_high")
        con.execute(
            "INSERT INTO dataset_levels SELECT d.dataset_id, p.position, p.code, "
            "coalesce(d.level_names[p.position], p.name), "
            f"CASE p.position {' '.join(f'WHEN {i} THEN d.{c}' for i, c in enumerate(counts, start=1))} END "
            "FROM datasets d, (SELECT unnest(?) AS position, unnest(?) AS code, unnest(?) AS name) p "
            "WHERE NOT EXISTS (SELECT 1 FROM dataset_levels x WHERE x.dataset_id = d.dataset_id)",
            [list(range(1, paper.k + 1)), list(paper.codes), list(paper.names)],
        )
        con.execute("ALTER TABLE datasets DROP COLUMN n_middle")
        con.execute("ALTER TABLE datasets DROP COLUMN n_high")
    if "leaf" in _columns(con, "taxonomy_nodes"):
        con.execute(
            "CREATE TABLE taxonomy_nodes_v7 (dataset_id VARCHAR NOT NULL, leaf_index INTEGER NOT NULL, "
            "path VARCHAR[] NOT NULL, PRIMARY KEY (dataset_id, leaf_index))"
        )
        con.execute("INSERT INTO taxonomy_nodes_v7 SELECT dataset_id, leaf_index, [leaf, middle, high] FROM taxonomy_nodes")
        con.execute("DROP TABLE taxonomy_nodes")
        con.execute("ALTER TABLE taxonomy_nodes_v7 RENAME TO taxonomy_nodes")
    # Every study's plan over its dataset's levels, as creation writes it now (the default plan).
    unplanned = con.execute(
        "SELECT s.study_id, list(l.code ORDER BY l.position), list(l.name ORDER BY l.position) "
        "FROM studies s JOIN dataset_levels l USING (dataset_id) "
        "WHERE NOT EXISTS (SELECT 1 FROM study_levels x WHERE x.study_id = s.study_id) GROUP BY s.study_id"
    ).fetchall()
    for study_id, codes, names in unplanned:
        con.executemany(
            "INSERT INTO study_levels VALUES (?, ?, ?, ?, ?)",
            study_level_rows(study_id, LevelPlan.default(Levels(codes, names))),
        )
    tuning = _columns(con, "tuning")
    old_maps = [f"{code}_mAP" for code in LevelPlan.default(paper).hier]
    if set(old_maps) <= tuning:
        for code, column in zip(LevelPlan.default(paper).hier, old_maps, strict=True):
            con.execute(
                f"INSERT INTO tuning_levels SELECT study_id, geometry, tau, ?, {column} FROM tuning", [code]
            )
        for column in old_maps:
            con.execute(f"ALTER TABLE tuning DROP COLUMN {column}")
    if "leaf_middle" in _columns(con, "taxonomy_shuffles"):
        for position, edge, dev, fixed, fixed_min in _V6_EDGES:
            con.execute(
                f"INSERT INTO taxonomy_shuffle_edges SELECT study_id, ?, ?, {edge}, {dev}, {fixed}, {fixed_min} "
                "FROM taxonomy_shuffles",
                [position, edge],
            )
        for _, *columns in _V6_EDGES:
            for column in columns:
                con.execute(f"ALTER TABLE taxonomy_shuffles DROP COLUMN {column}")


def study_level_rows(study_id: str, plan: LevelPlan) -> list[tuple[str, int, str, bool, bool]]:
    """The `study_levels` rows of a study's level plan, leaf (position 1) first: written when the study
    is created (and by the migration to version 7)."""
    return [
        (study_id, i, code, code in plan.trained, code in plan.hier)
        for i, code in enumerate(plan.levels.codes, start=1)
    ]


# Migrations from version N to N+1, applied in order inside one transaction each. schema.sql is the
# current version; version 2 only added tables, and schema.sql's statements are idempotent; version 3
# added two columns to jobs; version 4 only added the replication_stages table, so it re-applies the
# idempotent schema like version 2; version 5 only added the arm_durations table, likewise; version 6 only
# added the calibrations and replication_work tables, likewise; version 7 turned the three levels into rows.
def _add_objective_params(con: duckdb.DuckDBPyConnection) -> None:
    """Version 8: each run records the parameters its objective adds to the projector's (leaf prototypes,
    HIER's proxies); runs recorded before it count 0, as none of their objectives but HIER's had any."""
    con.execute("ALTER TABLE runs ADD COLUMN IF NOT EXISTS objective_params INTEGER DEFAULT 0")


MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    1: _apply_schema,
    2: _add_executor_columns,
    3: _apply_schema,
    4: _apply_schema,
    5: _apply_schema,
    6: _k_levels,
    7: _add_objective_params,
}

_LOCK_RE = re.compile(r"Conflicting lock is held in (?P<exe>.*?) \(PID (?P<pid>\d+)\)")
log = logging.getLogger("hierconsole.store")


def _holder(exc: BaseException) -> str:
    match = _LOCK_RE.search(str(exc))
    return f"PID {match['pid']} ({match['exe']})" if match else "another process"


def _busy_error(home: Path, exc: BaseException) -> StoreBusyError:
    return StoreBusyError(
        f"the store {db_path(home)} is in use by {_holder(exc)}. Only one hierconsole can write to a "
        f"store at a time: launch from that console (or wait for that run to end, or stop it), or pass "
        f"another folder with --home DIR (or HIERCONSOLE_HOME). Read commands (studies, runs, effects, "
        f"audit, export) work meanwhile."
    )


def _is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


@contextlib.contextmanager
def kept_from_writers(home: Path, why: str) -> Iterator[None]:
    """While inside, no other process can open the home's store for writing: the file is held open
    read-only, whose shared lock a writer's open is refused by (it says so, naming this process). Raises
    StoreBusyError, naming the holder and `why` it matters, when a process holds the store already. A
    file that is missing, or too damaged to open, is held by nobody (nor kept: there is nothing to keep)."""
    path = db_path(home)
    con = None
    if path.exists():
        try:
            con = duckdb.connect(str(path), read_only=True)
        except duckdb.Error as exc:
            if _is_lock_error(exc):
                raise StoreBusyError(f"the store {path} is in use by {_holder(exc)}: {why}") from None
    try:
        yield
    finally:
        if con is not None:
            with contextlib.suppress(duckdb.Error):
                con.close()


def _reason(exc: BaseException) -> str:
    """The first line of a DuckDB error, without its category prefix; for an "invalidated" database,
    the original error that invalidated it (e.g. the full disk), which is what the user can fix."""
    text = str(exc).strip()
    original = re.search(r"Original error: \"?(?P<why>[^\n]+?)\"?$", text, re.MULTILINE)
    first = original["why"] if original else (text.splitlines()[0] if text else type(exc).__name__)
    return re.sub(r"^[A-Za-z ]+ Error: ", "", first)


def _damaged_error(path: Path, exc: BaseException) -> StoreDamagedError:
    reason = _reason(exc)
    return StoreDamagedError(
        f"the store {path} cannot be opened: {reason}. It is damaged or not a hierconsole store: "
        f"{recovery_advice(path.parent)}, or move it aside and use another --home DIR; nothing was changed.",
        reason=f"it cannot be opened ({reason})",
    )


def recovery_advice(home: Path) -> str:
    """What to do about a damaged store, in one clause: the doctor, and the newest backup if there is one."""
    newest = backups.newest(home)
    copy = f"restore the last backup ({newest})" if newest is not None else "restore it from a backup"
    return f"run `hierconsole --home {home} doctor --repair` to rebuild it from the job folders, or {copy}"


# DuckDB reports a damaged file as an I/O error ("Could not read enough bytes"), a bare Error ("Corrupt
# database file ... checksum"), or a serialization/internal error when a garbled block decodes to nonsense.
_DAMAGE_WORDS = ("corrupt", "checksum", "could not read", "read enough bytes", "serializ", "invalid block")


def is_damage(exc: BaseException) -> bool:
    """Whether a DuckDB error says the file is damaged (not a lock, not a bug in a query)."""
    if not isinstance(exc, duckdb.Error) or _is_lock_error(exc):
        return False
    if isinstance(exc, duckdb.IOException | duckdb.SerializationException | duckdb.InternalException):
        return True
    return any(word in str(exc).lower() for word in _DAMAGE_WORDS)


def damaged_while_reading(path: Path, exc: BaseException, home: Path | None = None) -> StoreDamagedError:
    """A read that met a damaged part of the store: nothing partial is shown, the whole command stops."""
    return StoreDamagedError(
        f"the store {path} is damaged ({_reason(exc)}), so nothing read from it can be trusted to be "
        f"complete: {recovery_advice(home or path.parent)}; nothing was changed.",
        reason=f"it is damaged ({_reason(exc)})",
    )


HEADER_BYTES = 3 * 4096
"""DuckDB's file starts with a main header and two database headers of 4 KiB each, then whole blocks."""


def check_complete(con: duckdb.DuckDBPyConnection, path: Path, home: Path | None = None) -> None:
    """Refuse a file cut short of a block its tables use (a truncated copy, a cut-off disk write):
    DuckDB itself only notices when a query reaches a missing block, and shows what lies before it
    as if it were all. (The header's block count is no measure: a checkpoint may leave free blocks at
    the end unwritten.)"""
    if path.suffix != ".duckdb" or not path.exists():
        return
    size = int(con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0])  # type: ignore[index]
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        "AND table_schema = 'main' AND table_catalog = current_database()"
    ).fetchall()]  # fmt: skip
    last = -1
    for table in tables:
        row = con.execute("SELECT max(block_id) FROM pragma_storage_info(?)", [table]).fetchone()
        if row is not None and row[0] is not None:
            last = max(last, int(row[0]))
    needed = HEADER_BYTES + (last + 1) * size
    held = path.stat().st_size
    if held < needed:
        raise StoreDamagedError(
            f"the store {path} is truncated: its tables use {needed} bytes and the file holds {held}, so "
            f"nothing read from it can be trusted to be complete: {recovery_advice(home or path.parent)}; "
            f"nothing was changed.",
            reason=f"it is truncated (its tables use {needed} bytes, the file holds {held})",
        )


def _orphaned_home(home: Path) -> bool:
    """A home whose job folders outlive its store: the store was deleted or lost."""
    studies = home / "studies"
    return studies.is_dir() and any(studies.glob(f"*/jobs/*/{layout.SPEC}"))


def _missing_error(path: Path) -> StoreDamagedError:
    return StoreDamagedError(
        f"the store {path} is missing, though the home holds job folders of studies it recorded (it was "
        f"deleted or lost): {recovery_advice(path.parent)}; nothing was created."
    )


def _write_failure(path: Path, exc: BaseException) -> StoreWriteError:
    reason = _reason(exc)
    return StoreWriteError(
        f"the store {path} could not save changes ({reason}). Jobs keep their checkpoints and event logs; "
        f"fix the cause (free disk space, check the file system) and run `hierconsole resume`."
    )


KEY_BATCH = 1024
"""Keys a lookup of `Store.scan_keys` names at once: within DuckDB's index_scan_max_count (2048), so the
lookup goes through the index rather than a table scan."""


class Store:
    """An open store. Use as a context manager, or call close().

    `read_only=True` is what read commands use: the file is never written (no migration, the views are
    session-local), a missing store reads as an empty one, and a store another process holds is read
    through that holder's live snapshot. `source` then says what was read.
    """

    def __init__(
        self, home: str | Path | None = None, *, read_only: bool = False, path: Path | None = None
    ):
        self.home = resolve_home(home, create=not read_only)
        if read_only and not self.home.is_dir():
            # A mistyped --home would otherwise read as an empty store and print empty tables, exit 0.
            raise HierconsoleError(
                f"no hierconsole home at {self.home} (the folder does not exist); pass the --home (or "
                f"HIERCONSOLE_HOME) your studies were run with, or run `hierconsole demo` to start one"
            )
        self.path = path or db_path(self.home)
        """The file; another than the home's only for `doctor --repair`, which rebuilds into a new one."""
        self.read_only = read_only
        self.source = str(self.path)
        """What this store reads: the file, a live snapshot (with its holder and age), or nothing yet."""
        self.live = False
        """Reading the live snapshot of a store another process holds."""
        self._failed: StoreWriteError | None = None
        self._closed = False
        self._local = threading.local()
        self._conn = self._open()
        self._queue: queue.Queue[tuple[Callable[[duckdb.DuckDBPyConnection], Any], Future] | None] = (
            queue.Queue()
        )
        self._writer_conn = self._conn.cursor()
        self._publisher: live.Publisher | None = None
        self._keeper: backups.Keeper | None = None
        if read_only:
            self._writer: threading.Thread | None = None
            try:
                self._check_version(self._writer_conn)
                if not self.live:
                    check_complete(self._writer_conn, self.path, self.home)
            except duckdb.Error as exc:
                self._conn.close()
                raise (damaged_while_reading(self.path, exc, self.home) if is_damage(exc) else exc) from None
            except BaseException:
                self._conn.close()
                raise
            return
        self._writer = threading.Thread(target=self._write_loop, name="hierconsole-writer", daemon=True)
        self._writer.start()
        try:
            self.write(self._migrate)
        except duckdb.Error as exc:
            self.close()
            raise (damaged_while_reading(self.path, exc, self.home) if is_damage(exc) else exc) from None
        except BaseException:
            self.close()
            raise
        # A file other than the home's (a rebuild under way) is nobody's to read meanwhile, nor to back up.
        home_store = self.path == db_path(self.home)
        self._publisher = live.Publisher(self.home, self.path) if home_store else None
        self._keeper = (
            backups.Keeper(self.home, self.path, backups.BackupPolicy.from_env())
            if home_store
            else None
        )

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self.path == db_path(self.home) and not self.path.exists() and _orphaned_home(self.home):
            raise _missing_error(self.path)
        if not self.read_only:
            try:
                return duckdb.connect(str(self.path))
            except duckdb.Error as exc:
                if _is_lock_error(exc):
                    raise _busy_error(self.home, exc) from None
                if "permission denied" in str(exc).lower() or "read-only file system" in str(exc).lower():
                    raise StoreReadOnlyError(
                        f"the store {self.path} is read-only here ({_reason(exc)}); read commands (studies, "
                        f"runs, effects, audit, export) work on it; to run or change anything, copy the home "
                        f"folder somewhere writable and pass --home COPY"
                    ) from None
                if isinstance(exc, duckdb.IOException) and not self.path.exists():
                    raise HierconsoleError(f"cannot create the store {self.path}: {exc}") from None
                raise _damaged_error(self.path, exc) from None
        if not self.path.exists():
            # Nothing stored yet: an empty in-memory store with the schema, so listings are empty.
            self.source = f"{self.path} (not created yet: empty)"
            con = duckdb.connect(":memory:")
            _apply_schema(con)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            return con
        try:
            return duckdb.connect(str(self.path), read_only=True)
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise _damaged_error(self.path, exc) from None
            busy = exc
        snapshot = live.latest(self.home)
        if snapshot is None:
            raise StoreBusyError(
                f"the store {self.path} is held by {_holder(busy)}, which publishes no live snapshot yet "
                f"(it may have just started, or be an older hierconsole); try again in a few seconds"
            ) from None
        try:
            con = duckdb.connect(str(snapshot.path), read_only=True)
        except duckdb.Error:
            # The holder may have closed (and withdrawn its snapshot) in between: the file may be free.
            try:
                return duckdb.connect(str(self.path), read_only=True)
            except duckdb.Error:
                raise StoreBusyError(
                    f"the store {self.path} is held by {_holder(busy)} and its live snapshot was being "
                    f"replaced; try again"
                ) from None
        self.source = snapshot.describe()
        self.live = True
        return con

    # -- lifecycle -------------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
        if self._publisher is not None:
            self._publisher.withdraw()
        with contextlib.suppress(duckdb.Error):
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ----------------------------------------------------------------------------------------
    @staticmethod
    def _stored_version(con: duckdb.DuckDBPyConnection) -> int | None:
        """The schema version in the file; None when it holds no hierconsole tables at all."""
        counted = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
        ).fetchone()
        assert counted is not None  # count(*) always gives one row
        if not counted[0]:
            return None
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _check_version(self, con: duckdb.DuckDBPyConnection) -> int:
        version = self._stored_version(con)
        if version is None:
            tables = con.execute("SELECT count(*) FROM information_schema.tables").fetchone()
            if tables and tables[0]:
                raise StoreDamagedError(
                    f"{self.path} is a DuckDB file but not a hierconsole store (it has no meta table); "
                    f"use another --home DIR, or move the file aside"
                )
            version = 0
        if version > SCHEMA_VERSION:
            raise StoreDamagedError(
                f"the store {self.path} has schema version {version}, newer than this hierconsole "
                f"understands ({SCHEMA_VERSION}); upgrade hierconsole, or use another --home DIR"
            )
        if self.read_only and version < SCHEMA_VERSION:
            raise StoreNeedsUpgradeError(
                f"the store {self.path} has schema version {version} and needs an upgrade to "
                f"{SCHEMA_VERSION}, which a read command does not write. Any command that writes (e.g. "
                f"`hierconsole --home {self.home} resume`) upgrades it in place, once; for an archived or "
                f"read-only home, copy the folder somewhere writable and run one with --home COPY; "
                f"nothing was changed"
            )
        return version

    def _migrate(self, con: duckdb.DuckDBPyConnection) -> None:
        """Bring the file to this version's schema and views, writing only what differs: a store that is
        already current is not changed by being opened (a refused import leaves it byte-identical)."""
        stored = version = self._check_version(con)
        if stored:
            check_complete(con, self.path, self.home)
        if version == 0:
            _apply_schema(con)
            version = SCHEMA_VERSION
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](con)
            version += 1
        if version != stored:
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(version)])
        views = views_sql()
        digest = hashlib.sha256(views.encode()).hexdigest()
        if self._meta(con, VIEWS_KEY) != digest:
            con.execute(views)
            con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [VIEWS_KEY, digest])

    @staticmethod
    def _meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
        row = con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return None if row is None else str(row[0])

    # -- writing ---------------------------------------------------------------------------------------
    def _write_loop(self) -> None:
        con = self._writer_conn
        while True:
            try:
                item = self._queue.get(timeout=live.REFRESH_SECONDS)
            except queue.Empty:
                self._publish(con, changed=False)
                self._back_up(con)
                continue
            if item is None:
                self._back_up(con)  # a lock's backup asked for just before the store closes
                break
            # Batch whatever else is already queued into the same transaction: DuckDB commits are costly.
            batch = [item]
            stop = False
            while len(batch) < 256:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            try:
                self._run_batch(con, batch)
            except BaseException as exc:  # noqa: BLE001 - every waiting caller is told; none may hang
                self._fail(batch, exc)
            else:
                self._publish(con, changed=True)
                if self._keeper is not None:
                    self._keeper.changed = True
                self._back_up(con)
            if stop:
                self._back_up(con)
                break
        with contextlib.suppress(duckdb.Error):
            con.close()

    def _fail(self, batch: list[tuple[Callable, Future]], exc: BaseException) -> None:
        """A commit (or BEGIN/ROLLBACK) failed: the store cannot be trusted to take more writes.

        Every caller of this batch, and of every later write, gets the error rather than waiting for a
        commit that will never come (a full disk once hung `hierconsole run` forever here).
        """
        if self._failed is None:
            self._failed = _write_failure(self.path, exc)
            log.info("store write failed: %s", exc)
            if self._publisher is not None:
                self._publisher.withdraw()  # second shells must not read an ever older "live" state
        for _, fut in batch:
            if not fut.done():
                fut.set_exception(self._failed)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._queue.put(None)
                return
            item[1].set_exception(self._failed)

    def _publish(self, con: duckdb.DuckDBPyConnection, *, changed: bool) -> None:
        if self._publisher is None or self._failed is not None:
            return
        try:
            self._publisher.maybe_publish(con, changed=changed)
        except duckdb.Error as exc:
            # The snapshot's CHECKPOINT writes the store itself: its failure (a full disk) is the
            # store's, and DuckDB may refuse everything after it.
            self._fail([], exc)

    def _back_up(self, con: duckdb.DuckDBPyConnection) -> None:
        if self._keeper is None or self._failed is not None or not self._keeper.due():
            return
        try:
            self._keeper.take(con)
        except duckdb.Error as exc:
            self._fail([], exc)  # the CHECKPOINT failed: the store's own failure, as for the snapshot

    def request_backup(self) -> None:
        """Ask for a backup after the writes queued so far (a study lock asks for one)."""
        if self._keeper is not None:
            self._keeper.requested = True

    @staticmethod
    def _run_batch(con: duckdb.DuckDBPyConnection, batch: list[tuple[Callable, Future]]) -> None:
        """Run a batch of writes in one transaction. An error raised by a write is that write's caller's;
        an error of the transaction itself (BEGIN, COMMIT, ROLLBACK) propagates to the writer loop."""
        con.execute("BEGIN TRANSACTION")
        results: list[tuple[Future, Any]] = []
        failed: BaseException | None = None
        for fn, fut in batch:
            try:
                results.append((fut, fn(con)))
            except BaseException as exc:  # noqa: BLE001 - reported to the caller through its future
                failed = exc
                fut.set_exception(exc)
                break
        if failed is None:
            con.execute("COMMIT")
            for fut, value in results:
                fut.set_result(value)
            return
        con.execute("ROLLBACK")
        # The others in the batch were innocent: rerun each alone so one bad write rolls back only itself.
        for fn, fut in batch:
            if fut.done():
                continue
            con.execute("BEGIN TRANSACTION")
            try:
                value = fn(con)
            except BaseException as exc:  # noqa: BLE001
                con.execute("ROLLBACK")
                fut.set_exception(exc)
            else:
                con.execute("COMMIT")
                fut.set_result(value)

    def submit(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> Future[T]:
        """Queue a write; it runs in a transaction on the writer thread."""
        if self._closed:
            raise RuntimeError("store is closed")
        if self.read_only:
            raise RuntimeError("this store was opened read-only; a read command tried to write")
        if self._failed is not None:
            raise self._failed
        fut: Future[T] = Future()
        self._queue.put((fn, fut))
        return fut

    def write(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Run a write in one transaction on the writer thread and wait for it."""
        fut = self.submit(fn)
        while True:
            try:
                return fut.result(timeout=1.0)
            except TimeoutError:
                # A writer thread that died (it should not: `_fail` catches) must not hang its callers.
                if self._writer is not None and not self._writer.is_alive() and not fut.done():
                    raise self._failed or _write_failure(self.path, RuntimeError("writer stopped")) from None

    @property
    def held(self) -> bool:
        """Whether an orchestrating process holds this store: this one (opened for writing), or the
        holder whose live snapshot this reads. A read-only open of the file itself means nobody does."""
        return not self.read_only or self.live

    @property
    def failed(self) -> StoreWriteError | None:
        """The write failure that stopped this store, if any."""
        return self._failed

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.write(lambda con: con.execute(sql, params or []))

    # -- integrity -------------------------------------------------------------------------------------
    def table_names(self) -> list[str]:
        return [r[0] for r in self.rows(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_schema = 'main' ORDER BY table_name"
        )]  # fmt: skip

    def scan_table(self, table: str) -> int:
        """Read every value of `table` (a hash over whole rows touches each column's every block, so a
        damaged block anywhere in it is met here); its row count. Raises StoreDamagedError."""
        return int(self.value(f'SELECT count(*) + 0 * coalesce(sum(hash(t)), 0) FROM "{table}" AS t'))

    def scan_keys(self) -> int:
        """Look every key of every one-column primary key up through its index; the keys looked up.
        Raises StoreDamagedError.

        A table scan never reads an index, but a command's lookup by id (`WHERE study_id = ?`) does: a
        damaged index block passed every table scan while `export` and `effects` refused the store. The
        keys go in lists short enough (`KEY_BATCH`) that DuckDB answers them through the index."""
        looked_up = 0
        for table, column in self.rows(
            "SELECT table_name, constraint_column_names[1] FROM duckdb_constraints() WHERE schema_name = 'main' "
            "AND constraint_type = 'PRIMARY KEY' AND len(constraint_column_names) = 1 ORDER BY ALL"
        ):
            keys = [r[0] for r in self.rows(f'SELECT "{column}" FROM "{table}"')]
            for start in range(0, len(keys), KEY_BATCH):
                batch = keys[start : start + KEY_BATCH]
                self.value(
                    f'SELECT count(*) + 0 * coalesce(sum(hash(t)), 0) FROM "{table}" AS t '
                    f'WHERE "{column}" IN ({", ".join("?" * len(batch))})',
                    batch,
                )
            looked_up += len(keys)
        return looked_up

    def verify_readable(self) -> dict[str, int]:
        """Every table read in full, and every key looked up through its index: {table: rows}. The
        console checks this once at start, so a damage is named before a screen shows part of the store
        as if it were all."""
        counts = {table: self.scan_table(table) for table in self.table_names()}
        self.scan_keys()
        return counts

    # -- reading ---------------------------------------------------------------------------------------
    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._conn.cursor()
            if self.read_only:
                # TEMP views belong to one cursor: each reading thread gets this version's views.
                cur.execute(views_sql(temporary=True))
            self._local.cursor = cur
        return cur

    def _read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        try:
            return fn(self._cursor())
        except duckdb.FatalException as exc:
            # DuckDB invalidated the database (a write failed): every later query is refused too.
            if self._failed is None:
                self._failed = _write_failure(self.path, exc)
            raise self._failed from None
        except duckdb.Error as exc:
            # After a failed commit DuckDB may refuse every query: say why, not "invalidated".
            if self._failed is not None:
                raise self._failed from None
            if is_damage(exc):
                raise damaged_while_reading(self.path, exc, self.home) from None
            raise

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        return self._read(lambda cur: cur.execute(sql, params or []).fetchall())

    def one(self, sql: str, params: Sequence[Any] | None = None) -> tuple | None:
        rows = self.rows(sql, params)
        return rows[0] if rows else None

    def value(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """The one value of a query that always yields one row (a count, an aggregate without GROUP BY)."""
        row = self.one(sql, params)
        if row is None:
            raise ValueError(f"expected one row from {sql!r}, got none")
        return row[0]

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return self._read(lambda cur: cur.sql(sql, params=list(params or [])).pl())

    def dicts(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        def fetch(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
            cur = cur.execute(sql, params or [])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

        return self._read(fetch)
