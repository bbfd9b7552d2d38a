"""The SQLite backend: one aiosqlite connection shared by every coroutine
(plus a second one for bulk jobs, see `_bulk_write`).

Throughput is bounded by trips to aiosqlite's worker thread (~0.1 ms each,
more than the SQL itself), so every write transaction — BEGIN IMMEDIATE, its
statements, COMMIT or ROLLBACK — runs as one synchronous function on that
thread (`_write`): one trip per add_message, and statements of two
transactions can never interleave on the shared connection. The asyncio lock
additionally keeps transactions and reads in arrival order, and still guards
any multi-trip transaction. add_message finds the session by key inside its
INSERT, and a trigger bumps the session's updated_at.

Full text: `messages_fts` has one row per active indexed message, written in
the message's transaction (columns and why: core/store/fts.py). Searching
and context reads live in sqlite_search.py, edits, deletions, imports and
rebuilds in sqlite_index.py; both are plain functions of a sqlite3
connection that this class runs on the worker thread, one trip each.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite

from core.messages import ChatKind
from core.search.query import build_query
from core.search.snippet import make_snippet
from core.store import sqlite_index, sqlite_search
from core.store.base import (
    DuplicateMessage,
    ImportRow,
    MessageRecord,
    NewMessage,
    SearchHit,
    SearchScope,
    SessionRecord,
    Store,
    UnknownSession,
    is_indexed,
)
from core.store.fts import session_filter
from core.store.migrations import Migration, apply_migrations, current_version, load_migrations
from core.store.sqlite_rows import (
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    from_ms,
    message_record,
    session_record,
    to_ms,
)

if TYPE_CHECKING:
    from core.search.redact import Redactor

__all__ = ["SqliteStore", "from_ms", "to_ms"]

T = TypeVar("T")

# Rows per import transaction: large enough for bulk speed, small enough that
# a live message waits at most about a tenth of a second for the write lock.
IMPORT_BATCH = 5000

# How long a statement waits for another connection's lock before failing
# with "database is locked" (set first, so switching to WAL waits it out too).
BUSY_TIMEOUT = 5.0

_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA foreign_keys = ON",
    # With WAL, NORMAL only risks the last commits on power loss, never corruption.
    "PRAGMA synchronous = NORMAL",
    # 64 MiB of page cache (default 2 MiB) holds the per-session index pages
    # of a million messages: bulk imports stay fast as the database grows, and
    # search candidates are looked up without going to the OS.
    "PRAGMA cache_size = -65536",
    # A checkpoint (every 1,000 WAL pages by default) syncs the WAL and the
    # database file; with a dozen pages per message that was about a third of
    # add_message's time. 10,000 pages (~40 MB of WAL) makes it rare; the
    # cost is that a power loss (not a crash) may drop a few more commits.
    "PRAGMA wal_autocheckpoint = 10000",
)

# Longer texts are indexed on the bulk connection: tens of thousands of
# distinct words would leave the live connection's FTS5 table that large.
BULK_TEXT_CHARS = 16_384

# The session is looked up by key inside the INSERT itself: one statement,
# and always the session that has this key now. (An id cached in Python could
# name a session deleted since, whose id SQLite may have given to another
# chat.) No row inserted means no such session.
_MESSAGE_INSERT = (
    "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, payload, "
    "sender_id, platform_message_id, in_reply_to, ts) "
    "SELECT id, platform, chat_id, ?, ?, ?, ?, ?, ?, ?, ? FROM sessions WHERE key = ? "
    "RETURNING id, session_id"
)

_SESSION_UPSERT = (
    "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, thread_id, "
    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET updated_at = max(updated_at, excluded.updated_at) "
    f"RETURNING {SESSION_COLUMNS}"
)

# The partial index sessions_index_behind holds exactly these sessions.
SESSIONS_BEHIND = "SELECT key FROM sessions WHERE index_behind = 1 ORDER BY id LIMIT ?"

# Walks messages_session_turn backwards from the turn and stops after `limit`
# rows; history() reverses them rather than sorting again in SQL.
_HISTORY = (
    f"SELECT {MESSAGE_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
    "WHERE s.key = ? AND coalesce(m.in_reply_to, m.id) < ? AND m.active = 1 "
    "ORDER BY coalesce(m.in_reply_to, m.id) DESC, m.id DESC LIMIT ?"
)


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


def _snapshot(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    # A deferred transaction takes no lock until its first read, and in WAL
    # mode readers never block the writer.
    conn.execute("BEGIN")
    try:
        return work(conn)
    finally:
        with suppress(sqlite3.OperationalError):
            conn.execute("COMMIT")


def _is_constraint(exc: sqlite3.IntegrityError, name: str) -> bool:
    return getattr(exc, "sqlite_errorname", "") == name


class SqliteStore(Store):
    def __init__(
        self,
        path: str | Path,
        *,
        migrations: Sequence[Migration] | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        self._path = str(path)
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._migrations = list(migrations) if migrations is not None else load_migrations()
        self._db: aiosqlite.Connection | None = None
        # Bulk jobs' own connection, opened on first use (see _bulk_write).
        self._bulk: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> str:
        return self._path

    async def open(self) -> None:
        if self._db is not None:
            return
        if not callable(getattr(aiosqlite.Connection, "_execute", None)):
            raise RuntimeError("this aiosqlite has no Connection._execute; see SqliteStore._write")
        db = await self._connect()
        try:
            await apply_migrations(db, self._migrations)
        except BaseException:
            await db.close()
            raise
        self._db = db

    async def _connect(self) -> aiosqlite.Connection:
        db = await aiosqlite.connect(self._path, isolation_level=None)
        try:
            await db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            for pragma in _PRAGMAS:
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

    async def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(conn)` in one BEGIN IMMEDIATE … COMMIT on the worker thread.

        IMMEDIATE takes the write lock up front, so another process holding it
        shows up as a busy wait at BEGIN instead of a failed COMMIT. Because
        the whole transaction is one queued call, a cancelled caller cannot
        leave it half-open: it still commits or rolls back.
        """
        async with self._lock:
            db = self._conn()
            # aiosqlite has no public "run this on your thread" call; _execute
            # is that mechanism (its presence is checked in open()).
            return await db._execute(_transact, db._conn, work)

    async def _bulk_write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`_write` for bulk jobs (imports, reindexing, index compaction,
        session deletes), on a second connection of this store.

        FTS5 collects a transaction's index changes in a per-connection hash
        table that grows to fit the largest transaction and never shrinks,
        and every later commit on that connection walks all of it: after one
        reindex of a long session, each one-message write cost ~0.1 ms more
        (2,900/s instead of 3,800/s at a million messages). Bulk work on its
        own connection leaves the live one's table small. Both connections
        share the lock, so they never wait on each other inside SQLite.
        """
        async with self._lock:
            self._conn()  # raises when the store is closed
            if self._bulk is None:
                self._bulk = await self._connect()
            db = self._bulk
            return await db._execute(_transact, db._conn, work)

    def _writer_for(self, text: str) -> Callable[[Callable[[sqlite3.Connection], T]], Awaitable[T]]:
        """A message this long would grow the live connection's FTS5 table
        for good (see _bulk_write), so it is written on the bulk one."""
        return self._bulk_write if len(text) > BULK_TEXT_CHARS else self._write

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(conn)` in one read transaction on the worker thread: its
        statements see one snapshot, and cost one trip."""
        async with self._lock:
            db = self._conn()
            return await db._execute(_snapshot, db._conn, work)

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self._lock:
            return list(await self._conn().execute_fetchall(sql, params))

    async def schema_version(self) -> int:
        async with self._lock:
            return await current_version(self._conn())

    async def ensure_session(
        self,
        key: str,
        *,
        agent_id: str,
        platform: str,
        chat_id: str,
        chat_kind: ChatKind,
        thread_id: str | None,
        now: datetime,
    ) -> SessionRecord:
        params = (key, agent_id, platform, chat_id, chat_kind, thread_id, to_ms(now), to_ms(now))
        row = await self._write(lambda conn: conn.execute(_SESSION_UPSERT, params).fetchone())
        return session_record(row)

    async def get_session(self, key: str) -> SessionRecord | None:
        rows = await self._fetch(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE key = ?", (key,))
        if not rows:
            return None
        return session_record(rows[0])

    def _insert_index_row(
        self, conn: sqlite3.Connection, message_id: int, session_id: int, text: str
    ) -> None:
        sqlite_index.insert_index_row(conn, message_id, session_id, text)

    def _insert_message(self, conn: sqlite3.Connection, m: NewMessage, ts: int) -> tuple[int, int]:
        """The body of add_message's transaction: (message id, session id)."""
        values = (m.role, m.kind, m.text, m.payload, m.sender_id, m.platform_message_id)
        row = conn.execute(_MESSAGE_INSERT, (*values, m.in_reply_to, ts, m.session_key)).fetchone()
        if row is None:
            raise UnknownSession(f"no session {m.session_key!r}; call ensure_session first")
        message_id, session_id = row
        if is_indexed(m.role, m.kind):
            self._insert_index_row(conn, message_id, session_id, m.text)
        return message_id, session_id

    async def add_message(self, message: NewMessage) -> MessageRecord:
        m = message
        ts = to_ms(m.ts)
        try:
            message_id, session_id = await self._writer_for(m.text)(
                lambda conn: self._insert_message(conn, m, ts)
            )
        except sqlite3.IntegrityError as exc:
            if _is_constraint(exc, "SQLITE_CONSTRAINT_UNIQUE"):
                raise DuplicateMessage(
                    f"user message {m.platform_message_id!r} in session "
                    f"{m.session_key!r} is already stored"
                ) from exc
            if _is_constraint(exc, "SQLITE_CONSTRAINT_FOREIGNKEY"):
                raise UnknownSession(f"in_reply_to message {m.in_reply_to} does not exist") from exc
            raise
        row = (message_id, session_id, m.session_key, m.role, m.kind, m.text, ts, m.sender_id)
        return message_record((*row, m.platform_message_id, m.in_reply_to, m.payload, 1))

    async def set_platform_message_id(self, message_id: int, platform_message_id: str) -> None:
        sql = "UPDATE messages SET platform_message_id = ? WHERE id = ? RETURNING id"
        try:
            row = await self._write(
                lambda conn: conn.execute(sql, (platform_message_id, message_id)).fetchone()
            )
        except sqlite3.IntegrityError as exc:
            if _is_constraint(exc, "SQLITE_CONSTRAINT_UNIQUE"):
                raise DuplicateMessage(
                    f"platform message id {platform_message_id!r} is already stored"
                ) from exc
            raise
        if row is None:
            raise LookupError(f"no message with id {message_id}")

    async def history(
        self, session_key: str, *, before_turn_of: int, limit: int
    ) -> list[MessageRecord]:
        if limit <= 0:
            return []
        rows = await self._fetch(_HISTORY, (session_key, before_turn_of, limit))
        return [message_record(row) for row in reversed(rows)]

    async def unanswered(self, *, since: datetime) -> list[MessageRecord]:
        rows = await self._fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE m.role = 'user' AND m.kind = 'text' AND m.ts >= ? AND m.active = 1 "
            # Only a final reply (or the apology for a failed turn) answers a
            # message; a turn that crashed between tool rounds is unanswered.
            "AND NOT EXISTS (SELECT 1 FROM messages r WHERE r.in_reply_to = m.id "
            "AND r.role = 'assistant' AND r.kind IN ('text', 'error')) "
            "ORDER BY m.ts, m.id",
            (to_ms(since),),
        )
        return [message_record(row) for row in rows]

    async def sessions_with_last_platform_id(
        self, platform: str
    ) -> list[tuple[SessionRecord, str | None]]:
        columns = ", ".join(f"s.{c.strip()}" for c in SESSION_COLUMNS.split(","))
        rows = await self._fetch(
            f"SELECT {columns}, (SELECT m.platform_message_id FROM messages m "
            "WHERE m.session_id = s.id AND m.role = 'user' "
            "AND m.platform_message_id IS NOT NULL "
            "ORDER BY CAST(m.platform_message_id AS INTEGER) DESC LIMIT 1) "
            "FROM sessions s WHERE s.platform = ? ORDER BY s.id",
            (platform,),
        )
        return [(session_record(row), row[9]) for row in rows]

    async def get_message(self, message_id: int) -> MessageRecord | None:
        rows = await self._fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m "
            "JOIN sessions s ON s.id = m.session_id WHERE m.id = ?",
            (message_id,),
        )
        return message_record(rows[0]) if rows else None

    # --- search ---------------------------------------------------------------

    async def search(
        self, query: str, *, scope: SearchScope, limit: int, redactor: Redactor
    ) -> list[SearchHit]:
        parsed = build_query(query)
        if parsed is None or limit <= 0:
            return []
        rows = await self._read(lambda conn: sqlite_search.search_rows(conn, parsed, scope, limit))
        # Redaction sees the whole text, so a secret is masked before any cut
        # could leave half of it inside the snippet.
        return [
            SearchHit(
                message_id=row.id,
                session_key=row.session_key,
                role=row.role,  # type: ignore[arg-type]
                ts=from_ms(row.ts),
                snippet=make_snippet(redactor.redact(row.text), parsed.terms),
                score=score,
            )
            for row, score in zip(rows, sqlite_search.scores(rows), strict=True)
        ]

    async def messages_around(
        self, session_key: str, *, around_message_id: int | None, limit: int
    ) -> list[MessageRecord]:
        if limit <= 0:
            return []
        rows = await self._read(
            lambda conn: sqlite_search.context_rows(conn, session_key, around_message_id, limit)
        )
        return [message_record(row) for row in rows]

    # --- lifecycle --------------------------------------------------------------

    async def edit_message(
        self, *, platform: str, chat_id: str, platform_message_id: str, text: str
    ) -> MessageRecord | None:
        row = await self._writer_for(text)(
            lambda conn: sqlite_index.edit(conn, platform, chat_id, platform_message_id, text)
        )
        return message_record(row) if row is not None else None

    async def delete_message(
        self, *, platform: str, chat_id: str, platform_message_id: str
    ) -> bool:
        return await self._write(
            lambda conn: sqlite_index.delete(conn, platform, chat_id, platform_message_id)
        )

    async def delete_session(self, session_key: str) -> int:
        return await self._bulk_write(lambda conn: sqlite_index.delete_session(conn, session_key))

    async def import_messages(self, rows: Sequence[ImportRow]) -> int:
        # Grouped by session (time order within it; stable, so file order
        # breaks ties): consecutive inserts then touch the same pages of the
        # per-session indexes, which makes a large import several times faster.
        checked = sorted(sqlite_index.check_import(rows), key=lambda r: (r[0], r[4]))
        stored = 0
        for start in range(0, len(checked), IMPORT_BATCH):
            batch = checked[start : start + IMPORT_BATCH]
            stored += await self._bulk_write(
                lambda conn, b=batch: sqlite_index.import_rows(conn, b)
            )
        return stored

    async def mark_index_behind(self, session_key: str | None = None) -> int:
        return await self._write(lambda conn: sqlite_index.mark_behind(conn, session_key))

    async def sessions_behind(self, limit: int = 100) -> list[str]:
        rows = await self._fetch(SESSIONS_BEHIND, (limit,))
        return [row[0] for row in rows]

    async def reindex_session(self, session_key: str) -> int:
        return await self._bulk_write(lambda conn: sqlite_index.reindex(conn, session_key))

    async def compact_index(self, pages: int = 500) -> bool:
        return await self._bulk_write(lambda conn: sqlite_index.merge_step(conn, pages))

    async def index_consistency(self, session_key: str | None = None) -> tuple[int, int]:
        return await self._read(lambda conn: sqlite_index.consistency(conn, session_key))

    async def count_index_rows(self, session_key: str | None = None) -> int:
        if session_key is None:
            rows = await self._fetch("SELECT count(*) FROM messages_fts")
        else:
            session = await self._fetch("SELECT id FROM sessions WHERE key = ?", (session_key,))
            if not session:
                return 0
            rows = await self._fetch(
                "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                (session_filter(session[0][0]),),
            )
        return int(rows[0][0])

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Run a query under the store's lock, outside any transaction.

        For diagnostics and for search code that builds richer FTS5 queries
        over `messages_fts`; writes must go through the Store methods.
        """
        return await self._fetch(sql, tuple(params))
