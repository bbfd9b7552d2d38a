"""The transcript Store on PostgreSQL: sessions, messages and their search rows.

Every method is one transaction (or one autocommit statement) on a pooled
connection of the shared PostgresConnection, so several workers can write
to one database. Transcript writes commit without waiting for the WAL flush
(`durable=False`, see connection.py); a power loss may lose the last moments,
as with SQLite's WAL at synchronous=NORMAL.

Search rows (`message_search`, migrations 0002 and 0007) are written in the
message's transaction (add_message: in its one statement); searching and
context reads live in search.py, edits, deletions, imports and rebuilds in
index.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from psycopg import errors

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
from core.store.postgres import index as pg_index
from core.store.postgres import search as pg_search
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.lexemes import tsvector_literal
from core.store.postgres.rows import (
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    message_record,
    session_record,
    utc,
)

if TYPE_CHECKING:
    from core.search.redact import Redactor

__all__ = ["PostgresStore"]

# Rows per import transaction: large enough for bulk speed, small enough that
# one transaction stays short.
IMPORT_BATCH = 5000

# add_message is one statement, so one trip to the server and its own
# transaction: the message and its search row are inserted together (a
# data-modifying WITH runs to completion whether or not it is read). The
# session is looked up by key inside it (once, for both rows: the search row
# takes its agent), so it is always the session that has this key now; no
# row inserted means no such session.
# `set_config(..., true)` is `SET LOCAL synchronous_commit = off` for this
# statement's transaction, what `transaction(durable=False)` does in two
# more trips (BEGIN and the SET); a row can only be inserted once it ran.
_MESSAGE_INSERT = (
    "WITH nondurable AS (SELECT set_config('synchronous_commit', 'off', true)), "
    "s AS (SELECT id, agent_id, platform, chat_id FROM sessions WHERE key = %(key)s), "
    "m AS (INSERT INTO messages(session_id, platform, chat_id, role, kind, text, payload, "
    "sender_id, platform_message_id, in_reply_to, ts, send_state) "
    "SELECT s.id, s.platform, s.chat_id, %(role)s, %(kind)s, %(text)s, %(payload)s, "
    "%(sender_id)s, %(platform_message_id)s, %(in_reply_to)s, %(ts)s, %(send_state)s "
    "FROM s, nondurable RETURNING id, session_id), "
    "x AS (INSERT INTO message_search(message_id, session_id, agent_id, search) "
    "SELECT m.id, m.session_id, s.agent_id, %(search)s::tsvector FROM m, s WHERE %(indexed)s) "
    "SELECT id, session_id FROM m"
)

_SESSION_UPSERT = (
    "INSERT INTO sessions AS s(key, agent_id, platform, chat_id, chat_kind, thread_id, "
    "created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT(key) DO UPDATE SET updated_at = greatest(s.updated_at, excluded.updated_at) "
    f"RETURNING {SESSION_COLUMNS}"
)

# The partial index sessions_index_behind holds exactly these sessions.
SESSIONS_BEHIND = "SELECT key FROM sessions WHERE index_behind ORDER BY id LIMIT %s"

# Walks messages_session_turn backwards from the turn and stops after `limit`
# rows; history() reverses them rather than sorting again in SQL.
_HISTORY = (
    f"SELECT {MESSAGE_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
    "WHERE s.key = %s AND coalesce(m.in_reply_to, m.id) < %s AND m.active "
    "ORDER BY coalesce(m.in_reply_to, m.id) DESC, m.id DESC LIMIT %s"
)

_UNANSWERED = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id "
    "WHERE m.role = 'user' AND m.kind = 'text' AND m.ts >= %s AND m.active "
    # Only a final reply (or the apology for a failed turn) answers a
    # message; a turn that crashed between tool rounds is unanswered.
    "AND NOT EXISTS (SELECT 1 FROM messages r WHERE r.in_reply_to = m.id "
    "AND r.role = 'assistant' AND r.kind IN ('text', 'error')) "
    "ORDER BY m.ts, m.id"
)

# The session's last messages up to the turn's own (a bounded walk of
# messages_session backwards), then those still owed an answer.
_UNANSWERED_UP_TO = (
    f"SELECT {MESSAGE_COLUMNS} FROM ("
    "SELECT * FROM messages WHERE session_id = %s AND id <= %s ORDER BY id DESC LIMIT %s"
    ") m JOIN sessions s ON s.id = m.session_id "
    "WHERE m.role = 'user' AND m.kind = 'text' AND m.active AND (m.id = %s OR m.ts >= %s) "
    "AND NOT EXISTS (SELECT 1 FROM messages r WHERE r.in_reply_to = m.id "
    "AND r.role = 'assistant' AND r.kind IN ('text', 'error')) "
    "ORDER BY m.id"
)

# Platform ids are compared as integers (Discord snowflakes grow with time);
# one that is not a number sorts last, as SQLite's CAST makes it 0.
_LAST_PLATFORM_ID = (
    f"SELECT {SESSION_COLUMNS}, (SELECT m.platform_message_id FROM messages m "
    "WHERE m.session_id = s.id AND m.role = 'user' AND m.platform_message_id IS NOT NULL "
    "ORDER BY CASE WHEN m.platform_message_id ~ '^[0-9]{1,30}$' "
    "THEN m.platform_message_id::numeric END DESC NULLS LAST LIMIT 1) "
    "FROM sessions s WHERE s.platform = %s ORDER BY s.id"
)


def _constraint(exc: errors.IntegrityError) -> str:
    return exc.diag.constraint_name or ""


class PostgresStore(Store):
    """The transcript store; the other PostgreSQL stores run on its connection."""

    def __init__(self, connection: PostgresConnection) -> None:
        self._db = connection

    @property
    def connection(self) -> PostgresConnection:
        return self._db

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        return await self._db.schema_version()

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
        at = utc(now)
        params = (key, agent_id, platform, chat_id, chat_kind, thread_id, at, at)
        async with self._db.transaction(durable=False) as conn:
            cursor = await conn.execute(_SESSION_UPSERT, params)
            row = await cursor.fetchone()
        assert row is not None  # an upsert with RETURNING always returns its row
        return session_record(row)

    async def get_session(self, key: str) -> SessionRecord | None:
        rows = await self._db.fetchall(
            f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE key = %s", (key,)
        )
        return session_record(rows[0]) if rows else None

    async def add_message(self, message: NewMessage) -> MessageRecord:
        m = message
        ts = utc(m.ts)
        indexed = is_indexed(m.role, m.kind)
        params = {
            "role": m.role, "kind": m.kind, "text": m.text, "payload": m.payload,
            "sender_id": m.sender_id, "platform_message_id": m.platform_message_id,
            "in_reply_to": m.in_reply_to, "ts": ts, "key": m.session_key, "indexed": indexed,
            "send_state": m.send_state,
            "search": tsvector_literal(m.text) if indexed else "",
        }  # fmt: skip
        try:
            async with self._db.connection() as conn:
                cursor = await conn.execute(_MESSAGE_INSERT, params)
                row = await cursor.fetchone()
        except errors.UniqueViolation as exc:
            raise DuplicateMessage(
                f"user message {m.platform_message_id!r} in session "
                f"{m.session_key!r} is already stored"
            ) from exc
        except errors.ForeignKeyViolation as exc:
            raise UnknownSession(f"in_reply_to message {m.in_reply_to} does not exist") from exc
        if row is None:
            raise UnknownSession(f"no session {m.session_key!r}; call ensure_session first")
        message_id, session_id = row
        return MessageRecord(
            message_id, session_id, m.session_key, m.role, m.kind, m.text, ts, m.sender_id,
            m.platform_message_id, m.in_reply_to, m.payload, active=True,
        )  # fmt: skip

    async def set_platform_message_id(self, message_id: int, platform_message_id: str) -> None:
        sql = "UPDATE messages SET platform_message_id = %s WHERE id = %s RETURNING id"
        await self._record_platform_id(sql, message_id, platform_message_id)

    async def _record_platform_id(
        self, sql: str, message_id: int, platform_message_id: str | None
    ) -> None:
        """Run `sql` (platform id, message id) on one message: a platform id
        another message holds is DuplicateMessage, no such message LookupError."""
        try:
            async with self._db.transaction(durable=False) as conn:
                cursor = await conn.execute(sql, (platform_message_id, message_id))
                row = await cursor.fetchone()
        except errors.UniqueViolation as exc:
            raise DuplicateMessage(
                f"platform message id {platform_message_id!r} is already stored"
            ) from exc
        if row is None:
            raise LookupError(f"no message with id {message_id}")

    async def begin_reply_send(self, message_id: int) -> bool:
        # Durable: the send it allows is an external effect (and its commit
        # flushes the reply's own asynchronous one before it).
        sql = (
            "UPDATE messages SET send_state = 'sending' "
            "WHERE id = %s AND send_state = 'stored' RETURNING id"
        )
        async with self._db.transaction() as conn:
            cursor = await conn.execute(sql, (message_id,))
            return await cursor.fetchone() is not None

    async def reply_sent(self, message_id: int, platform_message_id: str | None) -> None:
        sql = (
            "UPDATE messages SET send_state = 'sent', "
            "platform_message_id = coalesce(%s, platform_message_id) WHERE id = %s RETURNING id"
        )
        await self._record_platform_id(sql, message_id, platform_message_id)

    async def unsent_replies(self, *, since: datetime) -> list[MessageRecord]:
        rows = await self._db.fetchall(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE m.send_state = 'stored' AND m.ts >= %s AND m.active ORDER BY m.ts, m.id",
            (utc(since),),
        )
        return [message_record(row) for row in rows]

    async def history(
        self, session_key: str, *, before_turn_of: int, limit: int
    ) -> list[MessageRecord]:
        if limit <= 0:
            return []
        rows = await self._db.fetchall(_HISTORY, (session_key, before_turn_of, limit))
        return [message_record(row) for row in reversed(rows)]

    async def unanswered(self, *, since: datetime) -> list[MessageRecord]:
        rows = await self._db.fetchall(_UNANSWERED, (utc(since),))
        return [message_record(row) for row in rows]

    async def unanswered_up_to(
        self, message: MessageRecord, *, since: datetime
    ) -> list[MessageRecord]:
        rows = await self._db.fetchall(
            _UNANSWERED_UP_TO,
            (message.session_id, message.id, UNANSWERED_LOOKBACK, message.id, utc(since)),
        )
        return [message_record(row) for row in rows]

    async def sessions_with_last_platform_id(
        self, platform: str
    ) -> list[tuple[SessionRecord, str | None]]:
        rows = await self._db.fetchall(_LAST_PLATFORM_ID, (platform,))
        return [(session_record(row), row[9]) for row in rows]

    async def get_message(self, message_id: int) -> MessageRecord | None:
        rows = await self._db.fetchall(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m "
            "JOIN sessions s ON s.id = m.session_id WHERE m.id = %s",
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
        async with self._db.connection() as conn:
            rows = await pg_search.search_rows(conn, parsed, scope, limit)
        # Redaction sees the whole text, so a secret is masked before any cut
        # could leave half of it inside the snippet.
        return [
            SearchHit(
                message_id=row.id,
                session_key=row.session_key,
                role=row.role,  # type: ignore[arg-type]
                ts=utc(row.ts),
                snippet=make_snippet(redactor.redact(row.text), parsed.terms),
                score=score,
            )
            for row, score in zip(rows, pg_search.scores(rows), strict=True)
        ]

    async def messages_around(
        self, session_key: str, *, around_message_id: int | None, limit: int
    ) -> list[MessageRecord]:
        if limit <= 0:
            return []
        # Two reads without a shared snapshot: a message stored between them
        # can only shift the window by one, never show another session's.
        async with self._db.connection() as conn:
            rows = await pg_search.context_rows(conn, session_key, around_message_id, limit)
        return [message_record(row) for row in rows]

    # --- lifecycle --------------------------------------------------------------

    async def edit_message(
        self, *, platform: str, chat_id: str, platform_message_id: str, text: str
    ) -> MessageRecord | None:
        async with self._db.transaction(durable=False) as conn:
            row = await pg_index.edit(conn, platform, chat_id, platform_message_id, text)
        return message_record(row) if row is not None else None

    async def delete_message(
        self, *, platform: str, chat_id: str, platform_message_id: str
    ) -> bool:
        async with self._db.transaction(durable=False) as conn:
            return await pg_index.delete(conn, platform, chat_id, platform_message_id)

    async def delete_session(self, session_key: str) -> int:
        async with self._db.transaction() as conn:
            return await pg_index.delete_session(conn, session_key)

    async def import_messages(self, rows: Sequence[ImportRow]) -> int:
        # Grouped by session (time order within it; stable, so file order
        # breaks ties), as the SQLite backend does.
        checked = sorted(pg_index.check_import(rows), key=lambda r: (r[0], r[4]))
        stored = 0
        for start in range(0, len(checked), IMPORT_BATCH):
            async with self._db.transaction(durable=False) as conn:
                stored += await pg_index.import_rows(conn, checked[start : start + IMPORT_BATCH])
        return stored

    async def mark_index_behind(self, session_key: str | None = None) -> int:
        async with self._db.transaction() as conn:
            return await pg_index.mark_behind(conn, session_key)

    async def sessions_behind(self, limit: int = 100) -> list[str]:
        rows = await self._db.fetchall(SESSIONS_BEHIND, (limit,))
        return [row[0] for row in rows]

    async def reindex_session(self, session_key: str) -> int:
        async with self._db.transaction(durable=False) as conn:
            return await pg_index.reindex(conn, session_key)

    async def compact_index(self, pages: int = 500) -> bool:
        async with self._db.connection() as conn:
            return await pg_index.clean_pending_list(conn)
