"""The SQLite backend's full-text index: FTS5 rows beside the transcript
(what a row holds: fts.py), written in the message's transaction, rebuilt
per session, searched (search.py) and merged.

Deletions need no code here: the `messages_fts_delete` trigger removes a
message's row in the statement that removes the message, also for rows a
session delete cascades to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from core.search.query import SearchQuery
from core.store.base import SearchScope
from core.store.dialect import from_ms
from core.store.sql.database import Params, Row, Transaction, Work
from core.store.sql.index import BULK_TEXT_CHARS, Before, Match
from core.store.sql.transcript import IMPORT_COLUMNS, MESSAGE_INSERT
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.fts import INSERT, index_values, rowid_sql, session_filter
from core.store.sqlite.search import search_rows

T = TypeVar("T")

_DROP_ROW = f"DELETE FROM messages_fts WHERE rowid = {rowid_sql('?2', '?1')}"
_IMPORT = f"INSERT INTO messages({IMPORT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"


class Fts5Index:
    """The FullTextIndex (core/store/sql/index.py) of `messages_fts`."""

    def __init__(self, connection: SqliteConnection) -> None:
        self._connection = connection

    async def add_message(
        self, values: Params, text: str, *, indexed: bool, before: Before | None = None
    ) -> Row | None:
        async def work(tx: Transaction) -> Row | None:
            params = values
            if before is not None:
                params = (values[0], await before(tx), *values[2:])
            row = await tx.fetchone(MESSAGE_INSERT, params)
            if row is not None and indexed:
                await self.insert_row(tx, row[0], row[1], text)
            return row

        # A message this long would grow the live connection's FTS5 table
        # for good (see SqliteConnection.run_bulk_write): written as bulk.
        bulk = len(text) > BULK_TEXT_CHARS
        return await self._connection.transact(work, durable=False, bulk=bulk)

    async def insert_row(
        self, tx: Transaction, message_id: int, session_id: int, text: str
    ) -> None:
        await tx.execute(INSERT, (message_id, session_id, *index_values(text, session_id)))

    async def drop_row(self, tx: Transaction, message_id: int, session_id: int) -> None:
        await tx.execute(_DROP_ROW, (message_id, session_id))

    async def rebuild_session(
        self, tx: Transaction, session_id: int, messages: Sequence[Params]
    ) -> None:
        # Rows carrying this session's token, and rows of its messages whatever
        # token they carry: after this, only freshly built rows remain.
        await tx.execute(
            "DELETE FROM messages_fts WHERE rowid IN "
            "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)",
            (session_filter(session_id),),
        )
        await tx.execute(
            "DELETE FROM messages_fts WHERE rowid IN "
            f"(SELECT {rowid_sql('session_id', 'id')} FROM messages WHERE session_id = ?)",
            (session_id,),
        )
        rows = ((id_, session_id, *index_values(text, session_id)) for id_, text in messages)
        await tx.executemany(INSERT, rows)

    async def insert_imported(self, tx: Transaction, rows: Sequence[Params]) -> None:
        await tx.executemany(_IMPORT, rows)

    async def read(self, work: Work[T]) -> T:
        return await self._connection.snapshot(work)

    async def search(self, query: SearchQuery, scope: SearchScope, limit: int) -> list[Match]:
        rows = await self._connection.run_read(lambda conn: search_rows(conn, query, scope, limit))
        return [
            Match(r.id, r.session_key, r.role, from_ms(r.ts), r.text, -r.bm25, bool(r.phrase))
            for r in rows
        ]

    async def compact(self, pages: int) -> bool:
        return await self._connection.run_bulk_write(lambda conn: merge_step(conn, pages))

    async def writes(self) -> int:
        return (await self.shape()).leaves_written

    async def shape(self) -> IndexShape:
        """Levels, segments and write counter of the full-text index."""
        return await self._connection.run_read(index_shape)


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
