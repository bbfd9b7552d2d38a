"""The SQLite backend: one aiosqlite connection shared by every coroutine.

Throughput is bounded by trips to aiosqlite's worker thread (~0.1 ms each,
more than the SQL itself), so every write transaction — BEGIN IMMEDIATE, its
statements, COMMIT or ROLLBACK — runs as one synchronous function on that
thread (`_write`): one trip per add_message, and statements of two
transactions can never interleave on the shared connection. The asyncio lock
additionally keeps transactions and reads in arrival order, and still guards
any multi-trip transaction. Session ids are cached by key, and a trigger bumps
the session's updated_at.

Full text: `messages_fts` has one row per indexed message, rowid = message id,
with columns `_FTS_COLUMNS` filled from `_index_values(text)`. Adding a column
(e.g. CJK bigrams) means a migration that rebuilds the table and a new entry
in both places.
"""

from __future__ import annotations

import asyncio
import sqlite3
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import aiosqlite

from core.messages import ChatKind
from core.search.normalize import normalize
from core.store.base import (
    DuplicateMessage,
    MessageRecord,
    NewMessage,
    SessionRecord,
    Store,
    UnknownSession,
    is_indexed,
)
from core.store.migrations import Migration, apply_migrations, current_version, load_migrations

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

_PRAGMAS = (
    # First, so that switching to WAL also waits out another process's lock.
    "PRAGMA busy_timeout = 5000",
    "PRAGMA journal_mode = WAL",
    "PRAGMA foreign_keys = ON",
    # With WAL, NORMAL only risks the last commits on power loss, never corruption.
    "PRAGMA synchronous = NORMAL",
)

_FTS_COLUMNS: tuple[str, ...] = ("body",)
_FTS_INSERT = (
    f"INSERT INTO messages_fts(rowid, {', '.join(_FTS_COLUMNS)}) "
    f"VALUES (?{', ?' * len(_FTS_COLUMNS)})"
)

_MESSAGE_INSERT = (
    "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, payload, "
    "sender_id, platform_message_id, in_reply_to, ts) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)

_SESSION_COLUMNS = (
    "id, key, agent_id, platform, chat_id, chat_kind, thread_id, created_at, updated_at"
)
_SESSION_UPSERT = (
    "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, thread_id, "
    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET updated_at = max(updated_at, excluded.updated_at) "
    f"RETURNING {_SESSION_COLUMNS}"
)
_MESSAGE_COLUMNS = (
    "m.id, m.session_id, s.key, m.role, m.kind, m.text, m.ts, m.sender_id, "
    "m.platform_message_id, m.in_reply_to, m.payload, m.active"
)

# Walks messages_session_turn backwards from the turn and stops after `limit`
# rows; history() reverses them rather than sorting again in SQL.
_HISTORY = (
    f"SELECT {_MESSAGE_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
    "WHERE s.key = ? AND coalesce(m.in_reply_to, m.id) < ? AND m.active = 1 "
    "ORDER BY coalesce(m.in_reply_to, m.id) DESC, m.id DESC LIMIT ?"
)


def to_ms(value: datetime) -> int:
    """Aware datetime → integer milliseconds since the epoch (UTC)."""
    if value.tzinfo is None or value.utcoffset() is None:
        # A naive time is ambiguous; storing it as UTC would silently shift it.
        raise ValueError(f"naive datetime {value!r}: the store needs timezone-aware times")
    return (value - _EPOCH) // _MS


def from_ms(value: int) -> datetime:
    return _EPOCH + value * _MS


def _index_values(text: str) -> tuple[str, ...]:
    return (normalize(text),)


def _has_token_char(word: str) -> bool:
    # Mirrors unicode61's token characters (L*, N*, Co). A quoted phrase with
    # no token in it makes FTS5 match nothing at all, even inside an AND.
    return any(ch.isalnum() or unicodedata.category(ch) == "Co" for ch in word)


def match_expression(query: str) -> str | None:
    """Plain text → an FTS5 expression matching every word; None when empty.

    Every word becomes a quoted FTS5 string, so operators (AND, NEAR, -, *,
    col:, parentheses) in user input are only ever searched for as text.
    """
    # Lone surrogates cannot be encoded for SQLite; they carry no words anyway.
    query = query.encode("utf-8", "ignore").decode("utf-8")
    words = dict.fromkeys(w for w in normalize(query).split() if _has_token_char(w))
    if not words:
        return None
    return " AND ".join('"' + w.replace('"', '""') + '"' for w in words)


class _SessionRef(NamedTuple):
    id: int
    platform: str
    chat_id: str


# Both follow the field order of the record dataclasses (see the column lists).
def _session(row: sqlite3.Row | tuple[Any, ...]) -> SessionRecord:
    return SessionRecord(*row[:7], created_at=from_ms(row[7]), updated_at=from_ms(row[8]))


def _message(row: sqlite3.Row | tuple[Any, ...]) -> MessageRecord:
    return MessageRecord(*row[:6], from_ms(row[6]), *row[7:11], active=bool(row[11]))


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


def _is_constraint(exc: sqlite3.IntegrityError, name: str) -> bool:
    return getattr(exc, "sqlite_errorname", "") == name


class SqliteStore(Store):
    def __init__(self, path: str | Path, *, migrations: Sequence[Migration] | None = None) -> None:
        self._path = str(path)
        self._migrations = list(migrations) if migrations is not None else load_migrations()
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._sessions: dict[str, _SessionRef] = {}

    @property
    def path(self) -> str:
        return self._path

    async def open(self) -> None:
        if self._db is not None:
            return
        if not callable(getattr(aiosqlite.Connection, "_execute", None)):
            raise RuntimeError("this aiosqlite has no Connection._execute; see SqliteStore._write")
        db = await aiosqlite.connect(self._path, isolation_level=None)
        try:
            for pragma in _PRAGMAS:
                await db.execute(pragma)
            await apply_migrations(db, self._migrations)
        except BaseException:
            await db.close()
            raise
        self._db = db

    async def close(self) -> None:
        if self._db is None:
            return
        async with self._lock:
            db, self._db = self._db, None
            self._sessions.clear()
            await db.close()

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
        session = _session(row)
        self._sessions[key] = _SessionRef(session.id, session.platform, session.chat_id)
        return session

    async def get_session(self, key: str) -> SessionRecord | None:
        rows = await self._fetch(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = ?", (key,))
        if not rows:
            return None
        session = _session(rows[0])
        self._sessions[key] = _SessionRef(session.id, session.platform, session.chat_id)
        return session

    def _insert_index_row(self, conn: sqlite3.Connection, message_id: int, text: str) -> None:
        conn.execute(_FTS_INSERT, (message_id, *_index_values(text)))

    def _insert_message(
        self, conn: sqlite3.Connection, m: NewMessage, ts: int, cached: _SessionRef | None
    ) -> tuple[int, _SessionRef]:
        """The body of add_message's transaction, run on the worker thread."""
        ref = cached
        if ref is None:
            row = conn.execute(
                "SELECT id, platform, chat_id FROM sessions WHERE key = ?", (m.session_key,)
            ).fetchone()
            if row is None:
                raise UnknownSession(f"no session {m.session_key!r}; call ensure_session first")
            ref = _SessionRef(*row)
        values = (ref.id, ref.platform, ref.chat_id, m.role, m.kind, m.text, m.payload)
        values += (m.sender_id, m.platform_message_id, m.in_reply_to, ts)
        message_id = int(conn.execute(_MESSAGE_INSERT, values).fetchone()[0])
        if is_indexed(m.role, m.kind):
            self._insert_index_row(conn, message_id, m.text)
        return message_id, ref

    async def add_message(self, message: NewMessage) -> MessageRecord:
        m = message
        ts = to_ms(m.ts)
        cached = self._sessions.get(m.session_key)
        try:
            message_id, ref = await self._write(
                lambda conn: self._insert_message(conn, m, ts, cached)
            )
        except sqlite3.IntegrityError as exc:
            if _is_constraint(exc, "SQLITE_CONSTRAINT_UNIQUE"):
                raise DuplicateMessage(
                    f"user message {m.platform_message_id!r} in session "
                    f"{m.session_key!r} is already stored"
                ) from exc
            if _is_constraint(exc, "SQLITE_CONSTRAINT_FOREIGNKEY"):
                # The cached session may have been deleted behind our back.
                self._sessions.pop(m.session_key, None)
                raise UnknownSession(
                    f"session {m.session_key!r} or in_reply_to message "
                    f"{m.in_reply_to} does not exist"
                ) from exc
            raise
        self._sessions[m.session_key] = ref
        row = (message_id, ref.id, m.session_key, m.role, m.kind, m.text, ts, m.sender_id)
        return _message((*row, m.platform_message_id, m.in_reply_to, m.payload, 1))

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
        return [_message(row) for row in reversed(rows)]

    async def unanswered(self, *, since: datetime) -> list[MessageRecord]:
        rows = await self._fetch(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE m.role = 'user' AND m.kind = 'text' AND m.ts >= ? AND m.active = 1 "
            # Only a final reply (or the apology for a failed turn) answers a
            # message; a turn that crashed between tool rounds is unanswered.
            "AND NOT EXISTS (SELECT 1 FROM messages r WHERE r.in_reply_to = m.id "
            "AND r.role = 'assistant' AND r.kind IN ('text', 'error')) "
            "ORDER BY m.ts, m.id",
            (to_ms(since),),
        )
        return [_message(row) for row in rows]

    async def get_message(self, message_id: int) -> MessageRecord | None:
        rows = await self._fetch(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m "
            "JOIN sessions s ON s.id = m.session_id WHERE m.id = ?",
            (message_id,),
        )
        return _message(rows[0]) if rows else None

    async def search_text(
        self, query: str, *, session_key: str | None, limit: int
    ) -> list[MessageRecord]:
        expression = match_expression(query)
        if expression is None or limit <= 0:
            return []
        params: list[Any] = [expression]
        session_filter = ""
        if session_key is not None:
            session_filter = "AND s.key = ? "
            params.append(session_key)
        params.append(limit)
        # FTS5 only accepts the table's own name (not an alias) on the left of
        # MATCH and as bm25's argument.
        rows = await self._fetch(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages_fts "
            "JOIN messages m ON m.id = messages_fts.rowid "
            "JOIN sessions s ON s.id = m.session_id "
            f"WHERE messages_fts MATCH ? AND m.active = 1 {session_filter}"
            "ORDER BY bm25(messages_fts), m.ts DESC, m.id DESC LIMIT ?",
            params,
        )
        return [_message(row) for row in rows]

    async def count_index_rows(self, session_key: str | None = None) -> int:
        if session_key is None:
            rows = await self._fetch("SELECT count(*) FROM messages_fts")
        else:
            rows = await self._fetch(
                "SELECT count(*) FROM messages_fts "
                "JOIN messages m ON m.id = messages_fts.rowid "
                "JOIN sessions s ON s.id = m.session_id WHERE s.key = ?",
                (session_key,),
            )
        return int(rows[0][0])

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Run a query under the store's lock, outside any transaction.

        For diagnostics and for search code that builds richer FTS5 queries
        over `messages_fts`; writes must go through the Store methods.
        """
        return await self._fetch(sql, tuple(params))
