"""The DuckDB store: one file per home folder, one writer thread per process.

DuckDB lets exactly one process open a database file for writing, and not even a read-only second
opener is allowed while it does. So the process that opens the store (the TUI or a headless command) is
the only one that touches it: worker processes talk to it through events. Inside that process a DuckDB
connection is not thread-safe, so every write goes through one writer thread (which also lets many small
event writes be batched into one transaction), and each reading thread gets its own cursor.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import polars as pl

from hierconsole.errors import StoreBusyError
from hierconsole.locations import db_path, resolve_home, resource_dir
from hierconsole.study.views import views_sql

T = TypeVar("T")

SCHEMA_VERSION = 2


def _apply_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute((resource_dir("store") / "schema.sql").read_text())


# Migrations from version N to N+1, applied in order inside one transaction each. schema.sql is the
# current version; version 2 only added tables, and schema.sql's statements are idempotent.
MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {1: _apply_schema}

_LOCK_RE = re.compile(r"Conflicting lock is held in (?P<exe>.*?) \(PID (?P<pid>\d+)\)")


def _busy_error(home: Path, exc: duckdb.IOException) -> StoreBusyError:
    match = _LOCK_RE.search(str(exc))
    holder = f"PID {match['pid']} ({match['exe']})" if match else "another process"
    return StoreBusyError(
        f"the store {db_path(home)} is in use by {holder}. Only one hierconsole can open a store at a "
        f"time: use that console (or stop it), or pass another folder with --home DIR "
        f"(or HIERCONSOLE_HOME)."
    )


class Store:
    """An open store. Use as a context manager, or call close()."""

    def __init__(self, home: str | Path | None = None):
        self.home = resolve_home(home)
        self.path = db_path(self.home)
        try:
            self._conn = duckdb.connect(str(self.path))
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise _busy_error(self.home, exc) from None
            raise
        self._local = threading.local()
        self._queue: queue.Queue[tuple[Callable[[duckdb.DuckDBPyConnection], Any], Future] | None] = (
            queue.Queue()
        )
        self._writer = threading.Thread(target=self._write_loop, name="hierconsole-writer", daemon=True)
        self._writer_conn = self._conn.cursor()
        self._writer.start()
        self._closed = False
        self.write(self._migrate)

    # -- lifecycle -------------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join()
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ----------------------------------------------------------------------------------------
    @staticmethod
    def _migrate(con: duckdb.DuckDBPyConnection) -> None:
        counted = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
        ).fetchone()
        assert counted is not None  # count(*) always gives one row
        has_meta = counted[0]
        version = 0
        if has_meta:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
        if version == 0:
            _apply_schema(con)
            version = SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise StoreBusyError(
                f"this store has schema version {version}, newer than this hierconsole understands "
                f"({SCHEMA_VERSION}); upgrade hierconsole or use another --home"
            )
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](con)
            version += 1
        con.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
            [str(version)],
        )
        con.execute(views_sql())

    # -- writing ---------------------------------------------------------------------------------------
    def _write_loop(self) -> None:
        con = self._writer_conn
        while True:
            item = self._queue.get()
            if item is None:
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
            self._run_batch(con, batch)
            if stop:
                break
        con.close()

    @staticmethod
    def _run_batch(con: duckdb.DuckDBPyConnection, batch: list[tuple[Callable, Future]]) -> None:
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
        fut: Future[T] = Future()
        self._queue.put((fn, fut))
        return fut

    def write(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Run a write in one transaction on the writer thread and wait for it."""
        return self.submit(fn).result()

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.write(lambda con: con.execute(sql, params or []))

    # -- reading ---------------------------------------------------------------------------------------
    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._conn.cursor()
            self._local.cursor = cur
        return cur

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        return self._cursor().execute(sql, params or []).fetchall()

    def one(self, sql: str, params: Sequence[Any] | None = None) -> tuple | None:
        rows = self._cursor().execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    def value(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """The one value of a query that always yields one row (a count, an aggregate without GROUP BY)."""
        row = self.one(sql, params)
        if row is None:
            raise ValueError(f"expected one row from {sql!r}, got none")
        return row[0]

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return self._cursor().sql(sql, params=list(params or [])).pl()

    def dicts(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        cur = self._cursor().execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
