"""Index lifecycle of the PostgreSQL backend: edits, deletions, imports,
rebuilds, and folding the GIN index's pending list.

Every function here is the body of one transaction (the caller opens it),
so a message and its search row are never seen out of step. Deletions need
no code for the index: `message_search` rows go with their message (ON
DELETE CASCADE), also for messages a session delete cascades to; hiding a
message drops its row by trigger (migration 0002).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import errors

from core.messages import parse_session_key
from core.store.base import ImportRow, is_indexed
from core.store.postgres.connection import Connection
from core.store.postgres.lexemes import tsvector_literal
from core.store.postgres.rows import INDEXED_SQL, MESSAGE_COLUMNS, utc

# Import roles → the kind of row they become. A tool line is a tool result
# and, like every tool row, is never indexed.
IMPORT_KINDS = {"user": "text", "assistant": "text", "tool": "tool_result"}

# A row built again (a reindex racing a live write of the same message)
# replaces the one there: both were built from the same text.
# The agent is the session's (migration 0007), read in the same statement.
_UPSERT = (
    "ON CONFLICT (message_id) DO UPDATE SET session_id = excluded.session_id, "
    "agent_id = excluded.agent_id, search = excluded.search"
)
_INSERT = (
    "INSERT INTO message_search(message_id, session_id, agent_id, search) "
    "SELECT %(id)s, s.id, s.agent_id, %(search)s::tsvector FROM sessions s "
    f"WHERE s.id = %(session_id)s {_UPSERT}"
)

# A session's rows at once: message ids and their tsvector literals as arrays.
_INSERT_MANY = (
    "INSERT INTO message_search(message_id, session_id, agent_id, search) "
    "SELECT r.id, s.id, s.agent_id, r.lit::tsvector FROM sessions s, "
    "unnest(%(ids)s::bigint[], %(lits)s::text[]) AS r(id, lit) "
    f"WHERE s.id = %(session_id)s {_UPSERT}"
)

# A platform message is a user row (unique index messages_platform_dedupe)
# or one the bot sent (messages_sent_platform_id); each query repeats its
# index's WHERE term so the planner can use the partial index.
_PLATFORM_ID = "platform = %s AND chat_id = %s AND platform_message_id = %s"
BY_PLATFORM_ID = tuple(
    f"SELECT id, session_id, role, kind, active FROM messages WHERE {_PLATFORM_ID} AND {role} "
    "ORDER BY id DESC"
    for role in ("role = 'user'", "role <> 'user'")
)
DELETE_BY_PLATFORM_ID = tuple(
    f"DELETE FROM messages WHERE {_PLATFORM_ID} AND {role}"
    for role in ("role = 'user'", "role <> 'user'")
)


async def insert_search_row(conn: Connection, message_id: int, session_id: int, text: str) -> None:
    params = {"id": message_id, "session_id": session_id, "search": tsvector_literal(text)}
    await conn.execute(_INSERT, params)


async def edit(
    conn: Connection, platform: str, chat_id: str, platform_message_id: str, text: str
) -> tuple[Any, ...] | None:
    """New text for every row of that platform message; the first, re-read."""
    key = (platform, chat_id, platform_message_id)
    found: list[tuple[Any, ...]] = []
    for sql in BY_PLATFORM_ID:
        cursor = await conn.execute(sql, key)
        found += await cursor.fetchall()
    for message_id, session_id, role, kind, active in found:
        await conn.execute("UPDATE messages SET text = %s WHERE id = %s", (text, message_id))
        await conn.execute("DELETE FROM message_search WHERE message_id = %s", (message_id,))
        if active and is_indexed(role, kind):
            await insert_search_row(conn, message_id, session_id, text)
    if not found:
        return None
    cursor = await conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id "
        "WHERE m.id = %s",
        (found[0][0],),
    )
    return await cursor.fetchone()


async def delete(conn: Connection, platform: str, chat_id: str, platform_message_id: str) -> bool:
    key = (platform, chat_id, platform_message_id)
    deleted = 0
    for sql in DELETE_BY_PLATFORM_ID:
        cursor = await conn.execute(sql, key)
        deleted += cursor.rowcount
    return deleted > 0


async def delete_session(conn: Connection, session_key: str) -> int:
    cursor = await conn.execute("SELECT id FROM sessions WHERE key = %s FOR UPDATE", (session_key,))
    row = await cursor.fetchone()
    if row is None:
        return 0
    cursor = await conn.execute("SELECT count(*) FROM messages WHERE session_id = %s", row)
    counted = await cursor.fetchone()
    # Messages (and their search rows) go by ON DELETE CASCADE.
    await conn.execute("DELETE FROM sessions WHERE id = %s", row)
    return int(counted[0]) if counted else 0


_IMPORT_SESSION = (
    "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, thread_id, "
    "created_at, updated_at, index_behind) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, true) "
    "ON CONFLICT(key) DO UPDATE SET index_behind = true RETURNING id, platform, chat_id"
)
# One statement per batch (columns as arrays): the session trigger runs once.
_IMPORT_MESSAGES = (
    "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, ts) "
    "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::timestamptz[])"
)

CheckedRow = tuple[str, str, str, str, Any]


def check_import(rows: Sequence[ImportRow]) -> list[CheckedRow]:
    """(key, role, kind, text, ts) per row; ValueError names the first bad row."""
    checked: list[CheckedRow] = []
    for number, row in enumerate(rows, 1):
        kind = IMPORT_KINDS.get(row.role)
        if kind is None:
            raise ValueError(f"import row {number}: role {row.role!r} is not user/assistant/tool")
        try:
            parse_session_key(row.session_key)
            ts = utc(row.ts)
        except ValueError as exc:
            raise ValueError(f"import row {number}: {exc}") from exc
        checked.append((row.session_key, row.role, kind, row.text, ts))
    return checked


async def import_rows(conn: Connection, rows: Sequence[CheckedRow]) -> int:
    """Store checked rows and put their sessions behind; no search rows."""
    sessions: dict[str, tuple[Any, ...]] = {}
    for key, *_, ts in rows:
        if key in sessions:
            continue
        parts = parse_session_key(key)
        target = parts.target
        values = (key, parts.agent_id, target.platform, target.chat_id, parts.chat_kind)
        cursor = await conn.execute(_IMPORT_SESSION, (*values, target.thread_id, ts, ts))
        found = await cursor.fetchone()
        assert found is not None  # an upsert with RETURNING always returns its row
        sessions[key] = tuple(found)
    # sessions[key] is (session_id, platform, chat_id), the first columns.
    values = [(*sessions[key], role, kind, text, ts) for key, role, kind, text, ts in rows]
    await conn.execute(_IMPORT_MESSAGES, [list(column) for column in zip(*values, strict=True)])
    return len(rows)


async def mark_behind(conn: Connection, session_key: str | None) -> int:
    if session_key is None:
        cursor = await conn.execute("UPDATE sessions SET index_behind = true")
    else:
        sql = "UPDATE sessions SET index_behind = true WHERE key = %s"
        cursor = await conn.execute(sql, (session_key,))
    return cursor.rowcount


async def reindex(conn: Connection, session_key: str) -> int:
    """Drop and rebuild one session's search rows; mark the session current."""
    cursor = await conn.execute("SELECT id FROM sessions WHERE key = %s", (session_key,))
    row = await cursor.fetchone()
    if row is None:
        return 0
    session_id = int(row[0])
    # Rows claiming this session, and rows of its messages whatever session
    # they claim: after this, only freshly built rows remain.
    await conn.execute(
        "DELETE FROM message_search WHERE session_id = %s OR message_id IN "
        "(SELECT id FROM messages WHERE session_id = %s)",
        (session_id, session_id),
    )
    cursor = await conn.execute(
        f"SELECT m.id, m.text FROM messages m WHERE m.session_id = %s AND m.active "
        f"AND {INDEXED_SQL}",
        (session_id,),
    )
    messages = await cursor.fetchall()
    ids = [id_ for id_, _ in messages]
    lits = [tsvector_literal(t) for _, t in messages]
    await conn.execute(_INSERT_MANY, {"session_id": session_id, "ids": ids, "lits": lits})
    await conn.execute("UPDATE sessions SET index_behind = false WHERE id = %s", (session_id,))
    return len(messages)


async def clean_pending_list(conn: Connection) -> bool:
    """Fold the GIN index's pending list into the index proper; False when
    it was empty.

    PostgreSQL's equivalent of FTS5's segment merging: with `fastupdate`
    (the default) new entries go to an unsorted pending list that every
    search scans, up to `gin_pending_list_limit` (4 MB, about 500 pages, so
    one call is about the bounded step the port asks for). Vacuum folds it
    too; this lets the reconciler do it right after a bulk reindex.
    """
    try:
        cursor = await conn.execute("SELECT gin_clean_pending_list('message_search_words')")
    except errors.InsufficientPrivilege:
        # Only the index's owner may; vacuum still does it for other roles.
        return False
    row = await cursor.fetchone()
    return bool(row and row[0] > 0)
