"""Test helpers on the PostgreSQL backend: checks that run SQL on its
tables. None of this is part of a production interface."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from core.store.backends import Backend, open_backend
from core.store.postgres import PostgresStore
from core.store.postgres.lexemes import tsvector_literal
from core.store.sql.transcript import INDEXED_SQL


async def count_index_rows(store: PostgresStore, session_key: str | None = None) -> int:
    """Search rows, of one session or of all."""
    if session_key is None:
        rows = await store.connection.fetchall("SELECT count(*) FROM message_search")
    else:
        rows = await store.connection.fetchall(
            "SELECT count(*) FROM message_search WHERE session_id = "
            "(SELECT id FROM sessions WHERE key = %s)",
            (session_key,),
        )
    return int(rows[0][0])


# A search row is correct when it belongs to an active indexed message,
# names that message's session and holds the lexemes of its current text.
_ROW_MATCHES = "ms.message_id = e.id AND ms.session_id = e.sid AND ms.search = e.lit::tsvector"
_EXPECTED = "unnest(%(ids)s::bigint[], %(sids)s::bigint[], %(lits)s::text[]) AS e(id, sid, lit)"


async def index_consistency(
    store: PostgresStore, session_key: str | None = None
) -> tuple[int, int]:
    """(active indexed messages without a correct search row, search rows
    without their active indexed message); (0, 0) when consistent."""
    params: dict[str, Any] = {"key": session_key}
    in_session = ""
    if session_key is not None:
        found = await store.connection.fetchall(
            "SELECT id FROM sessions WHERE key = %s", (session_key,)
        )
        if not found:
            return 0, 0
        params["sid"] = found[0][0]
        in_session = "AND m.session_id = %(sid)s"
    messages = await store.connection.fetchall(
        f"SELECT m.id, m.session_id, m.text FROM messages m WHERE m.active AND {INDEXED_SQL} "
        f"{in_session}",
        params,
    )
    params["ids"] = [r[0] for r in messages]
    params["sids"] = [r[1] for r in messages]
    params["lits"] = [tsvector_literal(r[2]) for r in messages]
    missing = await store.connection.fetchall(
        f"SELECT count(*) FROM {_EXPECTED} WHERE NOT EXISTS "
        f"(SELECT 1 FROM message_search ms WHERE {_ROW_MATCHES})",
        params,
    )
    rows_in_scope = (
        ""
        if session_key is None
        else "WHERE (ms.session_id = %(sid)s OR ms.message_id IN "
        "(SELECT id FROM messages WHERE session_id = %(sid)s))"
    )
    orphans = await store.connection.fetchall(
        f"SELECT count(*) FROM message_search ms {rows_in_scope} "
        f"{'AND' if rows_in_scope else 'WHERE'} NOT EXISTS "
        f"(SELECT 1 FROM {_EXPECTED} WHERE {_ROW_MATCHES})",
        params,
    )
    return int(missing[0][0]), int(orphans[0][0])


async def deactivate(store: PostgresStore, message_id: int) -> None:
    async with store.connection.transaction() as conn:
        await conn.execute("UPDATE messages SET active = false WHERE id = %s", (message_id,))


async def execute(store: PostgresStore, sql: str, params: Any = ()) -> None:
    """Run one statement in its own transaction."""
    async with store.connection.transaction() as conn:
        await conn.execute(sql, params)


@asynccontextmanager
async def opened_backends(url: str, count: int) -> AsyncIterator[list[Backend]]:
    """`count` workers' backends on one database, each with its own pool."""
    opened: list[Backend] = []
    try:
        for _ in range(count):
            backend = open_backend(url)
            await backend.open()
            opened.append(backend)
        yield opened
    finally:
        for backend in opened:
            await backend.close()
