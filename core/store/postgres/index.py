"""The PostgreSQL backend's full-text index: one `message_search` row of
lexemes (lexemes.py) per active indexed message, written with the message,
rebuilt per session, searched (search.py), and its GIN pending list folded.

Deletions need no code here: `message_search` rows go with their message
(ON DELETE CASCADE), also for messages a session delete cascades to; hiding
a message drops its row by trigger (step 2, search).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from psycopg import errors

from core.search.query import SearchQuery
from core.store.base import SearchScope
from core.store.dialect import utc
from core.store.postgres import search as pg_search
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.lexemes import tsvector_literal
from core.store.sql.database import Params, Row, Transaction, Work
from core.store.sql.index import Before, Match
from core.store.sql.transcript import IMPORT_COLUMNS, NEW_MESSAGE_COLUMNS

T = TypeVar("T")

# add_message is one statement, so one trip to the server and its own
# transaction: the message and its search row are inserted together (a
# data-modifying WITH runs to completion whether or not it is read). The
# session is looked up by key inside it (once, for both rows: the search row
# takes its agent), so it is always the session that has this key now; no
# row inserted means no such session.
# `set_config(..., true)` is `SET LOCAL synchronous_commit = off` for this
# statement's transaction, what `transact(durable=False)` does in two more
# trips (BEGIN and the SET); a row can only be inserted once it ran.
# Parameters: the session key, the new message's values, the tsvector
# literal, whether it is indexed.
_MESSAGE_INSERT = (
    "WITH nondurable AS (SELECT set_config('synchronous_commit', 'off', true)), "
    "s AS (SELECT id, agent_id, platform, chat_id FROM sessions WHERE key = ?), "
    f"m AS (INSERT INTO messages(session_id, platform, chat_id, {NEW_MESSAGE_COLUMNS}) "
    "SELECT s.id, s.platform, s.chat_id, ?, ?, ?, ?, ?, ?, ?, ?, ? "
    "FROM s, nondurable RETURNING id, session_id), "
    "x AS (INSERT INTO message_search(message_id, session_id, agent_id, search) "
    "SELECT m.id, m.session_id, s.agent_id, ?::tsvector FROM m, s WHERE ?) "
    "SELECT id, session_id FROM m"
)

# A row built again (a reindex racing a live write of the same message)
# replaces the one there: both were built from the same text.
# The agent is the session's (step 11, search scope), read in the same statement.
_UPSERT = (
    "ON CONFLICT (message_id) DO UPDATE SET session_id = excluded.session_id, "
    "agent_id = excluded.agent_id, search = excluded.search"
)
_INSERT = (
    "INSERT INTO message_search(message_id, session_id, agent_id, search) "
    f"SELECT ?, s.id, s.agent_id, ?::tsvector FROM sessions s WHERE s.id = ? {_UPSERT}"
)
# A session's rows at once: message ids and their tsvector literals as arrays.
_INSERT_MANY = (
    "INSERT INTO message_search(message_id, session_id, agent_id, search) "
    "SELECT r.id, s.id, s.agent_id, r.lit::tsvector FROM sessions s, "
    f"unnest(?::bigint[], ?::text[]) AS r(id, lit) WHERE s.id = ? {_UPSERT}"
)
# One statement per batch (columns as arrays): the session trigger runs once.
_IMPORT = (
    f"INSERT INTO messages({IMPORT_COLUMNS}) "
    "SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], "
    "?::text[], ?::timestamptz[])"
)


class TsvectorIndex:
    """The FullTextIndex (core/store/sql/index.py) of `message_search`."""

    def __init__(self, connection: PostgresConnection) -> None:
        self._connection = connection

    async def add_message(
        self, values: Params, text: str, *, indexed: bool, before: Before | None = None
    ) -> Row | None:
        # values end with the session key, which the statement reads first.
        search = tsvector_literal(text) if indexed else ""
        params = (values[-1], *values[:-1], search, indexed)
        if before is None:
            rows = await self._connection.execute(_MESSAGE_INSERT, params)
            return rows[0] if rows else None

        async def work(tx: Transaction) -> Row | None:
            kind = await before(tx)
            return await tx.fetchone(_MESSAGE_INSERT, (params[0], params[1], kind, *params[3:]))

        return await self._connection.transact(work, durable=False)

    async def insert_row(
        self, tx: Transaction, message_id: int, session_id: int, text: str
    ) -> None:
        await tx.execute(_INSERT, (message_id, tsvector_literal(text), session_id))

    async def drop_row(self, tx: Transaction, message_id: int, session_id: int) -> None:
        await tx.execute("DELETE FROM message_search WHERE message_id = ?", (message_id,))

    async def rebuild_session(
        self, tx: Transaction, session_id: int, messages: Sequence[Params]
    ) -> None:
        # Rows claiming this session, and rows of its messages whatever session
        # they claim: after this, only freshly built rows remain.
        await tx.execute(
            "DELETE FROM message_search WHERE session_id = ? OR message_id IN "
            "(SELECT id FROM messages WHERE session_id = ?)",
            (session_id, session_id),
        )
        ids = [id_ for id_, _ in messages]
        lits = [tsvector_literal(text) for _, text in messages]
        await tx.execute(_INSERT_MANY, (ids, lits, session_id))

    async def insert_imported(self, tx: Transaction, rows: Sequence[Params]) -> None:
        await tx.execute(_IMPORT, [list(column) for column in zip(*rows, strict=True)])

    async def read(self, work: Work[T]) -> T:
        # Two reads without a shared snapshot: a message stored between them
        # can only shift a context window by one, never show another session's.
        return await self._connection.reads(work)

    async def search(self, query: SearchQuery, scope: SearchScope, limit: int) -> list[Match]:
        async with self._connection.connection() as conn:
            rows = await pg_search.search_rows(conn, query, scope, limit)
        return [
            Match(r.id, r.session_key, r.role, utc(r.ts), r.text, float(r.rank), bool(r.phrase))
            for r in rows
        ]

    async def compact(self, pages: int) -> bool:
        """Fold the GIN index's pending list into the index proper; False when
        it was empty.

        PostgreSQL's equivalent of FTS5's segment merging: with `fastupdate`
        (the default) new entries go to an unsorted pending list that every
        search scans, up to `gin_pending_list_limit` (4 MB, about 500 pages, so
        one call is about the bounded step the port asks for). Vacuum folds it
        too; this lets the reconciler do it right after a bulk reindex.
        """
        try:
            rows = await self._connection.query(
                "SELECT gin_clean_pending_list('message_search_words')"
            )
        except errors.InsufficientPrivilege:
            # Only the index's owner may; vacuum still does it for other roles.
            return False
        return bool(rows and rows[0][0] > 0)

    async def writes(self) -> int:
        # No segments to fold: the reconciler's compaction pace does not apply.
        return 0
