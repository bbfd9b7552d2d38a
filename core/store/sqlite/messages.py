"""The transcript Store on SQLite: sessions, messages and their full-text rows.

Every method is one trip to the connection's worker thread (see
connection.py). add_message finds the session by key inside its INSERT, and
a trigger bumps the session's updated_at.

Full text: `messages_fts` has one row per active indexed message, written in
the message's transaction (columns and why: fts.py). Searching and context
reads live in search.py, edits, deletions, imports and rebuilds in index.py;
both are plain functions of a sqlite3 connection that this class runs on the
worker thread, one trip each.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from core.messages import ChatKind
from core.search.query import build_query
from core.search.snippet import make_snippet
from core.store.base import (
    UNANSWERED_LOOKBACK,
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
from core.store.sqlite import index as sqlite_index
from core.store.sqlite import search as sqlite_search
from core.store.sqlite.connection import SqliteConnection, is_constraint
from core.store.sqlite.rows import (
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    from_ms,
    message_record,
    session_record,
    to_ms,
)

if TYPE_CHECKING:
    from core.search.redact import Redactor

__all__ = ["SqliteStore"]

# Rows per import transaction: large enough for bulk speed, small enough that
# a live message waits at most about a tenth of a second for the write lock.
IMPORT_BATCH = 5000

# The session is looked up by key inside the INSERT itself: one statement,
# and always the session that has this key now. (An id cached in Python could
# name a session deleted since, whose id SQLite may have given to another
# chat.) No row inserted means no such session.
_MESSAGE_INSERT = (
    "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, payload, "
    "sender_id, platform_message_id, in_reply_to, ts, send_state) "
    "SELECT id, platform, chat_id, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM sessions WHERE key = ? "
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


class SqliteStore(SqliteConnection, Store):
    """The transcript store; the other SQLite stores run on its connection."""

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
        params = (*values, m.in_reply_to, ts, m.send_state, m.session_key)
        row = conn.execute(_MESSAGE_INSERT, params).fetchone()
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
            if is_constraint(exc, "SQLITE_CONSTRAINT_UNIQUE"):
                raise DuplicateMessage(
                    f"user message {m.platform_message_id!r} in session "
                    f"{m.session_key!r} is already stored"
                ) from exc
            if is_constraint(exc, "SQLITE_CONSTRAINT_FOREIGNKEY"):
                raise UnknownSession(f"in_reply_to message {m.in_reply_to} does not exist") from exc
            raise
        row = (message_id, session_id, m.session_key, m.role, m.kind, m.text, ts, m.sender_id)
        return message_record((*row, m.platform_message_id, m.in_reply_to, m.payload, 1))

    async def set_platform_message_id(self, message_id: int, platform_message_id: str) -> None:
        sql = "UPDATE messages SET platform_message_id = ? WHERE id = ? RETURNING id"
        await self._record_platform_id(sql, message_id, platform_message_id)

    async def _record_platform_id(
        self, sql: str, message_id: int, platform_message_id: str | None
    ) -> None:
        """Run `sql` (platform id, message id) on one message: a platform id
        another message holds is DuplicateMessage, no such message LookupError."""
        try:
            row = await self._write(
                lambda conn: conn.execute(sql, (platform_message_id, message_id)).fetchone()
            )
        except sqlite3.IntegrityError as exc:
            if is_constraint(exc, "SQLITE_CONSTRAINT_UNIQUE"):
                raise DuplicateMessage(
                    f"platform message id {platform_message_id!r} is already stored"
                ) from exc
            raise
        if row is None:
            raise LookupError(f"no message with id {message_id}")

    async def begin_reply_send(self, message_id: int) -> bool:
        sql = (
            "UPDATE messages SET send_state = 'sending' "
            "WHERE id = ? AND send_state = 'stored' RETURNING id"
        )
        row = await self._write(lambda conn: conn.execute(sql, (message_id,)).fetchone())
        return row is not None

    async def reply_sent(self, message_id: int, platform_message_id: str | None) -> None:
        sql = (
            "UPDATE messages SET send_state = 'sent', "
            "platform_message_id = coalesce(?, platform_message_id) WHERE id = ? RETURNING id"
        )
        await self._record_platform_id(sql, message_id, platform_message_id)

    async def unsent_replies(self, *, since: datetime) -> list[MessageRecord]:
        rows = await self._fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE m.send_state = 'stored' AND m.ts >= ? AND m.active = 1 ORDER BY m.ts, m.id",
            (to_ms(since),),
        )
        return [message_record(row) for row in rows]

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

    async def unanswered_up_to(
        self, message: MessageRecord, *, since: datetime
    ) -> list[MessageRecord]:
        rows = await self._fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM ("
            "SELECT * FROM messages WHERE session_id = ? AND id <= ? ORDER BY id DESC LIMIT ?"
            ") m JOIN sessions s ON s.id = m.session_id "
            "WHERE m.role = 'user' AND m.kind = 'text' AND m.active = 1 "
            "AND (m.id = ? OR m.ts >= ?) "
            "AND NOT EXISTS (SELECT 1 FROM messages r WHERE r.in_reply_to = m.id "
            "AND r.role = 'assistant' AND r.kind IN ('text', 'error')) "
            "ORDER BY m.id",
            (message.session_id, message.id, UNANSWERED_LOOKBACK, message.id, to_ms(since)),
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
        # per-session indexes, which keeps a large import fast.
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

    async def index_writes(self) -> int:
        return (await self.index_shape()).leaves_written

    async def index_shape(self) -> sqlite_index.IndexShape:
        """Levels, segments and write counter of the full-text index."""
        return await self._read(sqlite_index.index_shape)
