"""The SQLite connection every SQLite store shares: one aiosqlite connection
for all coroutines (plus a second one for bulk jobs, see `run_bulk_write`).

Throughput is bounded by trips to aiosqlite's worker thread (more than the
SQL itself), so every write transaction — BEGIN IMMEDIATE, its statements,
COMMIT or ROLLBACK — runs as one synchronous function on that thread
(`run_write`): one trip per write, and statements of two transactions can never
interleave on the shared connection. The asyncio lock additionally keeps
transactions and reads in arrival order, and still guards any multi-trip
transaction. The transcript, commitment, heartbeat and reminder stores all
run on one SqliteConnection, so their writes never interleave either.

The file is created private and watched (files.py): a database deleted or
replaced under the running store makes every write raise DatabaseReplaced
(transient: nothing is confirmed), and no connection ever creates a file
once the store is open (they open with SQLite's mode=rw).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from core.clock import Clock, SystemClock
from core.store.dialect import SQLITE, SqliteDialect
from core.store.errors import DatabaseReplaced
from core.store.sql.database import Params, Row, Work
from core.store.sqlite import driver
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.files import FileWatch, create_private_file, match_companions
from core.store.sqlite.migrations import (
    Migration,
    current_version,
    load_migrations,
    open_schema,
)

T = TypeVar("T")


# How long a statement waits for another connection's lock before failing
# with "database is locked" (set first, so switching to WAL waits it out too).
BUSY_TIMEOUT = 5.0

_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA foreign_keys = ON",
    # With WAL, NORMAL only risks the last commits on power loss, never corruption.
    "PRAGMA synchronous = NORMAL",
    # 64 MiB of page cache (SQLite's default is 2 MiB) holds the per-session
    # index pages of a large transcript: bulk imports stay fast as the
    # database grows, and search candidates are looked up without the OS.
    "PRAGMA cache_size = -65536",
    # A page freed by a delete is zeroed, so erased text (core/privacy) does
    # not stay in the file's free pages.
    "PRAGMA secure_delete = ON",
)

# A checkpoint (every 1,000 WAL pages by default) syncs the WAL and the
# database file; with a dozen pages per message that was a large part of
# add_message's time. 10,000 pages (~40 MB of WAL) makes it rare; the
# cost is that a power loss (not a crash) may drop a few more commits.
WAL_AUTOCHECKPOINT_PAGES = 10_000

# SQLite reuses the WAL file from its start after a checkpoint and never
# shrinks it, so one burst (or one bulk transaction) would leave it at its
# largest for good. With a limit, the first commit after a checkpoint cuts
# it back to this size, and `checkpoint_log` empties it when idle.
JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024


def _transact(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        # Suppressed when SQLite already ended the transaction itself.
        with suppress(sqlite3.OperationalError):
            conn.execute("ROLLBACK")
        raise
    return result


class _Statements:
    """The Transaction of a body running on the worker thread: every call
    completes at once, so the body never suspends (see `_drive`)."""

    __slots__ = ("_conn",)
    dialect: SqliteDialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        self._conn.executemany(sql, rows)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return self._conn.execute(sql, params).fetchall()

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self._conn.execute(sql, params).fetchone()
        return row

    async def serialize(self, namespace: int, key: str) -> None:
        # BEGIN IMMEDIATE already holds the one write lock.
        return None


def _drive(work: Work[T]) -> Callable[[sqlite3.Connection], T]:
    """`work`, an async body, as a plain function of the connection: its
    statements complete without suspending, so one `send` runs it to the end
    on this thread (one trip for the whole transaction)."""

    def run(conn: sqlite3.Connection) -> T:
        body = work(_Statements(conn))
        try:
            body.send(None)  # type: ignore[attr-defined]
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        body.close()  # type: ignore[attr-defined]
        raise RuntimeError("a SQLite transaction body awaited something other than its statements")

    return run


def _snapshot(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    # A deferred transaction takes no lock until its first read, and in WAL
    # mode readers never block the writer.
    conn.execute("BEGIN")
    try:
        return work(conn)
    finally:
        with suppress(sqlite3.OperationalError):
            conn.execute("COMMIT")


def _truncate_wal(conn: sqlite3.Connection, busy_timeout_ms: int, wait: bool = False) -> bool:
    # Without a busy handler, a reader elsewhere makes the checkpoint fall
    # back to copying what it can (PASSIVE) instead of holding the store's
    # lock, and so every chat write, for up to the busy timeout. `wait`
    # keeps the handler: the caller needs the WAL emptied (an erasure).
    if not wait:
        conn.execute("PRAGMA busy_timeout = 0")
    try:
        busy, _log_frames, _copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    return not busy


class SqliteConnection:
    """The connection, its lock and the one-trip transaction helpers; opening
    it applies pending migrations (`migrate=False`: refuses a database whose
    schema is not the code's, changing nothing)."""

    dialect: SqliteDialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        migrations: Sequence[Migration] | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
        wal_autocheckpoint: int = WAL_AUTOCHECKPOINT_PAGES,
        journal_size_limit: int = JOURNAL_SIZE_LIMIT,
        migrate: bool = True,
        clock: Clock | None = None,
    ) -> None:
        self.path = str(path)
        self._migrate = migrate
        # None for an in-memory database, which has no file to lose.
        self._watch = (
            None if self.path == ":memory:" else FileWatch(Path(path), clock or SystemClock())
        )
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._wal_pragmas = (
            f"PRAGMA wal_autocheckpoint = {int(wal_autocheckpoint)}",
            f"PRAGMA journal_size_limit = {int(journal_size_limit)}",
        )
        self._journal_size_limit = int(journal_size_limit)
        self._migrations = list(migrations) if migrations is not None else load_migrations()
        self._db: aiosqlite.Connection | None = None
        # Bulk jobs' own connection, opened on first use (see run_bulk_write).
        self._bulk: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        # This store's WAL was emptied after its file went (see _guard).
        self._sealed = False

    async def open(self) -> None:
        if self._db is not None:
            return
        driver.check_version()
        if not callable(getattr(aiosqlite.Connection, "_execute", None)):
            raise RuntimeError(
                "this aiosqlite has no Connection._execute; see SqliteConnection.run_write"
            )
        if self._migrate and self._watch is not None:
            # Created here, 0600, so SQLite (which would create it under the
            # umask, 0644 as a rule) only ever opens an existing file.
            create_private_file(self._watch.path)
        db = await self._connect()
        if self._watch is not None:
            match_companions(self._watch.path)
            self._watch.opened()
        try:
            await open_schema(db, self._migrations, migrate=self._migrate)
        except BaseException:
            await db.close()
            raise
        self._db = db

    def _target(self) -> tuple[str, bool]:
        """What to hand sqlite3.connect, and whether it is a URI: a file is
        opened read-write without create, so a missing one is an error and
        never a fresh, empty database."""
        if self._watch is None:
            return self.path, False
        return f"{self._watch.path.absolute().as_uri()}?mode=rw", True

    async def _connect(self) -> aiosqlite.Connection:
        target, uri = self._target()
        connecting = driver.connect(target, isolation_level=None, uri=uri)
        try:
            db = await connecting
        except Exception:
            # A file that cannot be opened: aiosqlite stops its worker thread
            # without waiting for it, and a command that exits on this error
            # closes the loop first; the thread then prints a traceback.
            thread = getattr(connecting, "_thread", None)
            if thread is not None:
                await asyncio.to_thread(thread.join, BUSY_TIMEOUT)
            raise
        try:
            await db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            for pragma in (*_PRAGMAS, *self._wal_pragmas):
                await db.execute(pragma)
        except BaseException:
            await db.close()
            raise
        return db

    async def close(self) -> None:
        if self._db is None:
            return
        async with self._lock:
            db, self._db = self._db, None
            bulk, self._bulk = self._bulk, None
            await db.close()
            if bulk is not None:
                await bulk.close()

    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("store is not open; call open() first")
        return self._db

    async def _guard(self, *, force: bool = False, error: Exception | None = None) -> None:
        """Under the lock, before SQLite work (or after its `error`): raise
        DatabaseReplaced when the path no longer names the file this store
        opened (looked at once a second on the store's clock; at once with
        `force` or after an error). The first time, this store's WAL is
        emptied into the file it has open: left at the path's `-wal`, SQLite
        would read it over the replacement, or over the fresh database of
        the next start."""
        if self._watch is None:
            return
        try:
            self._watch.check(force=force or error is not None)
        except DatabaseReplaced as replaced:
            if not self._sealed and self._db is not None:
                self._sealed = True
                db = self._db
                with suppress(sqlite3.Error):
                    await db._execute(_truncate_wal, db._conn, self._busy_timeout_ms)
            if error is not None:
                raise replaced from error
            raise
        self._sealed = False

    async def _run(self, db: aiosqlite.Connection, runner: Callable[..., T], *args: Any) -> T:
        """`runner(conn, *args)` on the worker thread, the file guarded."""
        await self._guard()
        try:
            # aiosqlite has no public "run this on your thread" call; _execute
            # is that mechanism (its presence is checked in open()).
            return await db._execute(runner, db._conn, *args)
        except sqlite3.Error as exc:
            await self._guard(error=exc)
            raise

    async def run_write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(conn)` in one BEGIN IMMEDIATE … COMMIT on the worker thread.

        IMMEDIATE takes the write lock up front, so another process holding it
        shows up as a busy wait at BEGIN instead of a failed COMMIT. Because
        the whole transaction is one queued call, a cancelled caller cannot
        leave it half-open: it still commits or rolls back.
        """
        async with self._lock:
            return await self._run(self._conn(), _transact, work)

    async def run_bulk_write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`run_write` for bulk jobs (imports, reindexing, index compaction,
        session deletes), on a second connection of this store.

        FTS5 collects a transaction's index changes in a per-connection hash
        table that grows to fit the largest transaction and never shrinks,
        and every later commit on that connection walks all of it: after one
        reindex of a long session, every later one-message write is slower
        (bench/search.py measures it). Bulk work on its own connection leaves
        the live one's table small. Both connections share the lock, so they
        never wait on each other inside SQLite.
        """
        async with self._lock:
            self._conn()  # raises when the store is closed
            if self._bulk is None:
                # The path must still be the open database: a replacement
                # file would take bulk writes the live connection never sees.
                await self._guard(force=True)
                self._bulk = await self._connect()
            db = self._bulk
            return await self._run(db, _transact, work)

    async def run_read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(conn)` in one read transaction on the worker thread: its
        statements see one snapshot, and cost one trip."""
        async with self._lock:
            db = self._conn()
            return await self._run(db, _snapshot, work)

    def wal_bytes(self) -> int:
        """Size of the database's WAL file now (0 when there is none)."""
        try:
            return os.stat(self.path + "-wal").st_size
        except FileNotFoundError:
            return 0

    async def checkpoint_log(self) -> bool:
        """Copy the WAL into the database file and truncate it to nothing,
        when it has grown past the journal size limit; False when another
        connection (another process reading) kept it from finishing, in which
        case as much as could be copied without waiting was."""
        if self.wal_bytes() <= self._journal_size_limit:
            return True
        async with self._lock:
            db = self._conn()
            return await self._run(db, _truncate_wal, self._busy_timeout_ms)

    async def checkpoint_now(self) -> bool:
        """Copy the WAL into the database file and truncate it, waiting up to
        the busy timeout for readers; False when one still kept it from
        finishing."""
        async with self._lock:
            return await self._run(self._conn(), _truncate_wal, self._busy_timeout_ms, True)

    async def transact(self, work: Work[T], *, durable: bool = True, bulk: bool = False) -> T:
        """The Database port (core/store/sql/database.py): `work` in one
        BEGIN IMMEDIATE … COMMIT, one trip (`run_write`); `bulk` on the bulk
        connection (`run_bulk_write`). Every commit here is as durable as
        synchronous=NORMAL makes it, so `durable` changes nothing."""
        runner = _drive(work)
        return await (self.run_bulk_write(runner) if bulk else self.run_write(runner))

    async def snapshot(self, work: Work[T]) -> T:
        return await self.run_read(_drive(work))

    async def query(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.fetchall(sql, params)

    async def execute(self, sql: str, params: Params = ()) -> list[Row]:
        def one(conn: sqlite3.Connection) -> list[Row]:
            return conn.execute(sql, params).fetchall()

        return await self.run_write(one)

    async def schema_version(self) -> int:
        """The schema version; DatabaseReplaced when the file is gone (the
        readiness check asks this)."""
        async with self._lock:
            db = self._conn()
            await self._guard(force=True)
            return await current_version(db)

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[Row]:
        """Run a query under the store's lock, outside any transaction.

        For diagnostics and for reads that need no snapshot; writes must go
        through `run_write`.
        """
        async with self._lock:
            db = self._conn()
            await self._guard()
            try:
                return list(await db.execute_fetchall(sql, tuple(params)))
            except sqlite3.Error as exc:
                await self._guard(error=exc)
                raise
