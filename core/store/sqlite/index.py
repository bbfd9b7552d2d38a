"""Index lifecycle of the SQLite backend: edits, deletions, imports, rebuilds.

Every function here is the body of one transaction, run on the store's
worker thread by `SqliteConnection._write`, so a message and its full-text
row can never be seen out of step.
Deletions need no code for the index: the `messages_fts_delete` trigger
removes a message's row in the statement that removes the message, also for
rows a session delete cascades to.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.messages import parse_session_key
from core.store.base import ImportRow, is_indexed
from core.store.sqlite.fts import INSERT, index_values, rowid_sql, session_filter
from core.store.sqlite.rows import MESSAGE_COLUMNS, to_ms
from core.store.sqlite.search import INDEXED_SQL

# Import roles → the kind of row they become. A tool line is a tool result
# and, like every tool row, is never indexed.
IMPORT_KINDS = {"user": "text", "assistant": "text", "tool": "tool_result"}

# A platform message is a user row (unique index messages_platform_dedupe)
# or one the bot sent (messages_sent_platform_id); each query repeats its
# index's WHERE term so SQLite can use the partial index.
_PLATFORM_ID = "platform = ? AND chat_id = ? AND platform_message_id = ?"
BY_PLATFORM_ID = tuple(
    f"SELECT id, session_id, role, kind, active FROM messages WHERE {_PLATFORM_ID} AND {role} "
    "ORDER BY id DESC"
    for role in ("role = 'user'", "role <> 'user'")
)
DELETE_BY_PLATFORM_ID = tuple(
    f"DELETE FROM messages WHERE {_PLATFORM_ID} AND {role}"
    for role in ("role = 'user'", "role <> 'user'")
)


def insert_index_row(conn: sqlite3.Connection, message_id: int, session_id: int, text: str) -> None:
    conn.execute(INSERT, (message_id, session_id, *index_values(text, session_id)))


def edit(
    conn: sqlite3.Connection, platform: str, chat_id: str, platform_message_id: str, text: str
) -> tuple[Any, ...] | None:
    """New text for every row of that platform message; the first, re-read."""
    key = (platform, chat_id, platform_message_id)
    found = [row for sql in BY_PLATFORM_ID for row in conn.execute(sql, key).fetchall()]
    for message_id, session_id, role, kind, active in found:
        conn.execute("UPDATE messages SET text = ? WHERE id = ?", (text, message_id))
        conn.execute(
            f"DELETE FROM messages_fts WHERE rowid = {rowid_sql('?2', '?1')}",
            (message_id, session_id),
        )
        if active and is_indexed(role, kind):
            insert_index_row(conn, message_id, session_id, text)
    if not found:
        return None
    return conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id "
        "WHERE m.id = ?",
        (found[0][0],),
    ).fetchone()


def delete(conn: sqlite3.Connection, platform: str, chat_id: str, platform_message_id: str) -> bool:
    key = (platform, chat_id, platform_message_id)
    return sum(conn.execute(sql, key).rowcount for sql in DELETE_BY_PLATFORM_ID) > 0


def delete_session(conn: sqlite3.Connection, session_key: str) -> int:
    row = conn.execute("SELECT id FROM sessions WHERE key = ?", (session_key,)).fetchone()
    if row is None:
        return 0
    (count,) = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", row).fetchone()
    # Messages (and through the trigger their index rows) go by ON DELETE CASCADE.
    conn.execute("DELETE FROM sessions WHERE id = ?", row)
    return int(count)


_IMPORT_SESSION = (
    "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, thread_id, "
    "created_at, updated_at, index_behind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) "
    "ON CONFLICT(key) DO UPDATE SET index_behind = 1 RETURNING id, platform, chat_id"
)
_IMPORT_MESSAGE = (
    "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, ts) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def check_import(rows: Sequence[ImportRow]) -> list[tuple[str, str, str, str, int]]:
    """(key, role, kind, text, ts ms) per row; ValueError names the first bad row."""
    checked = []
    for number, row in enumerate(rows, 1):
        kind = IMPORT_KINDS.get(row.role)
        if kind is None:
            raise ValueError(f"import row {number}: role {row.role!r} is not user/assistant/tool")
        try:
            parse_session_key(row.session_key)
            ts = to_ms(row.ts)
        except ValueError as exc:
            raise ValueError(f"import row {number}: {exc}") from exc
        checked.append((row.session_key, row.role, kind, row.text, ts))
    return checked


def import_rows(conn: sqlite3.Connection, rows: Sequence[tuple[str, str, str, str, int]]) -> int:
    """Store checked rows and put their sessions behind; no index rows."""
    sessions: dict[str, tuple[int, str, str]] = {}
    for key, *_, ts in rows:
        if key in sessions:
            continue
        parts = parse_session_key(key)
        target = parts.target
        values = (key, parts.agent_id, target.platform, target.chat_id, parts.chat_kind)
        values += (target.thread_id, ts, ts)
        sessions[key] = conn.execute(_IMPORT_SESSION, values).fetchone()
    conn.executemany(
        _IMPORT_MESSAGE,
        # sessions[key] is (session_id, platform, chat_id), the first columns.
        ((*sessions[key], role, kind, text, ts) for key, role, kind, text, ts in rows),
    )
    return len(rows)


def mark_behind(conn: sqlite3.Connection, session_key: str | None) -> int:
    if session_key is None:
        return conn.execute("UPDATE sessions SET index_behind = 1").rowcount
    sql = "UPDATE sessions SET index_behind = 1 WHERE key = ?"
    return conn.execute(sql, (session_key,)).rowcount


def reindex(conn: sqlite3.Connection, session_key: str) -> int:
    """Drop and rebuild one session's index rows; mark the session current."""
    row = conn.execute("SELECT id FROM sessions WHERE key = ?", (session_key,)).fetchone()
    if row is None:
        return 0
    session_id = int(row[0])
    # Rows carrying this session's token, and rows of its messages whatever
    # token they carry: after this, only freshly built rows remain.
    conn.execute(
        "DELETE FROM messages_fts WHERE rowid IN "
        "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)",
        (session_filter(session_id),),
    )
    conn.execute(
        "DELETE FROM messages_fts WHERE rowid IN "
        f"(SELECT {rowid_sql('session_id', 'id')} FROM messages WHERE session_id = ?)",
        (session_id,),
    )
    messages = conn.execute(
        f"SELECT m.id, m.text FROM messages m WHERE m.session_id = ? AND m.active = 1 "
        f"AND {INDEXED_SQL}",
        (session_id,),
    ).fetchall()
    rows = ((id_, session_id, *index_values(text, session_id)) for id_, text in messages)
    conn.executemany(INSERT, rows)
    conn.execute("UPDATE sessions SET index_behind = 0 WHERE id = ?", (session_id,))
    return len(messages)


def merge_step(conn: sqlite3.Connection, pages: int) -> bool:
    """Merge FTS5 segments until about `pages` pages are written; False when
    no level had enough segments to be worth merging.

    Each transaction adds a segment, and FTS5 folds them together as it goes
    (automerge), a little on every write. A bulk reindex leaves many of them
    half-folded; without this, live message writes would carry that merging
    and queries would read more segments.
    """
    before = conn.total_changes
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)", (pages,))
    # FTS5's documented signal: fewer than two changes means no work was done.
    return conn.total_changes - before >= 2


@dataclass(frozen=True, slots=True)
class IndexShape:
    """The header of the full-text index's structure record."""

    levels: int
    segments: int
    # Leaf pages that writes have flushed into the index since it was
    # created; merges do not count. It only grows, and survives restarts.
    leaves_written: int


# FTS5 keeps its segment structure in row 10 of the %_data table: a 4-byte
# cookie, on newer SQLite versions possibly this 4-byte marker, then varints
# for levels, segments and the write counter (fts5_index.c, "structure
# record"; an on-disk format, so it stays readable across versions).
_STRUCTURE_ROWID = 10
_STRUCTURE_V2 = b"\xff\x00\x00\x01"


def _varints(data: bytes, offset: int, count: int) -> list[int]:
    """`count` SQLite varints (big-endian, 7 bits a byte, the 9th byte whole)
    from `offset`."""
    values = []
    for _ in range(count):
        value = 0
        for n in range(9):
            byte = data[offset]
            offset += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values


def index_shape(conn: sqlite3.Connection) -> IndexShape:
    row = conn.execute(
        "SELECT block FROM messages_fts_data WHERE id = ?", (_STRUCTURE_ROWID,)
    ).fetchone()
    if row is None or not row[0]:
        return IndexShape(0, 0, 0)
    data = bytes(row[0])
    offset = 8 if data[4:8] == _STRUCTURE_V2 else 4
    levels, segments, leaves = _varints(data, offset, 3)
    return IndexShape(levels, segments, leaves)
