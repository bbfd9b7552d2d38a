"""Search and context reads of the PostgreSQL backend.

One search is one statement:

1. The window: the RANK_WINDOW newest search rows (by message id) inside
   the scope that match every unit of the query (`search @@ tsquery`, from
   the GIN index). The scope is applied here, before the LIMIT, so rows
   outside it never take result slots; a session scope is a column of the
   search row, an agent scope the ids of that agent's sessions. Only active
   messages have search rows (migration 0002). A common word is ranked
   among its newest matches only: ranking is computed per candidate, and
   for such words the newer messages are the better answer anyway. The
   window is never smaller than what the ranking keeps.
2. Ranking: messages holding the whole query as a phrase first, then
   `ts_rank_cd(search, query, 2)` (cover density, divided by the message's
   length, so a short exact message beats a long one that mentions the word
   in passing, as bm25 does), then the newest by time. The window's rows are
   ranked on their search rows alone; only the winners are read from
   `messages`.
3. The winners' scope and visibility are checked again on the messages
   themselves (defence in depth: a search row out of step can never show
   another chat's message; at worst it shortens the list).

The statement is never prepared (connection.py): a generic plan for it can
walk the whole primary key instead of the GIN index.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from core.search.query import SearchQuery
from core.store.base import SearchScope
from core.store.postgres.connection import Connection
from core.store.postgres.lexemes import query_tsquery, unit_tsquery
from core.store.postgres.rows import INDEXED_SQL, MESSAGE_COLUMNS

RANK_WINDOW = 2500


class RankedRow(NamedTuple):
    id: int
    session_key: str
    role: str
    ts: datetime
    text: str
    rank: float
    phrase: bool


def ranked_sql(scope: SearchScope, *, phrase: bool) -> str:
    """The ranked statement for a search in `scope`."""
    window_scope = check = ""
    if scope.session_key is not None:
        window_scope = "AND ms.session_id = %(session_id)s "
        check = "AND m.session_id = %(session_id)s "
    elif scope.agent_id is not None:
        window_scope = (
            "AND ms.session_id IN (SELECT id FROM sessions WHERE agent_id = %(agent_id)s) "
        )
        check = "AND s.agent_id = %(agent_id)s "
    flag = "w.search @@ %(phrase)s::tsquery" if phrase else "false"
    return (
        "WITH w AS MATERIALIZED (SELECT ms.message_id, ms.search FROM message_search ms "
        f"WHERE ms.search @@ %(query)s::tsquery {window_scope}"
        "ORDER BY ms.message_id DESC LIMIT %(window)s), "
        # Ranked on the search rows alone, ties broken by id; only the
        # winners (twice `limit`, so ties at the cut are settled by time)
        # are read from messages.
        f"r AS (SELECT w.message_id, ts_rank_cd(w.search, %(query)s::tsquery, 2) AS rank, "
        f"{flag} AS phrase FROM w ORDER BY phrase DESC, rank DESC, w.message_id DESC "
        "LIMIT %(inner_limit)s) "
        "SELECT m.id, s.key, m.role, m.ts, m.text, r.rank, r.phrase "
        "FROM r JOIN messages m ON m.id = r.message_id JOIN sessions s ON s.id = m.session_id "
        f"WHERE m.active AND {INDEXED_SQL} {check}"
        "ORDER BY r.phrase DESC, r.rank DESC, m.ts DESC, m.id DESC LIMIT %(limit)s"
    )


async def search_rows(
    conn: Connection, query: SearchQuery, scope: SearchScope, limit: int
) -> list[RankedRow]:
    """The best `limit` rows for `query` inside `scope`."""
    tsquery = query_tsquery(query.units)
    if tsquery is None:
        return []
    phrase = None if query.phrase_unit is None else unit_tsquery(query.phrase_unit)
    params: dict[str, Any] = {"query": tsquery, "phrase": phrase, "limit": limit}
    params["inner_limit"] = 2 * limit
    params |= {"window": max(RANK_WINDOW, 2 * limit), "agent_id": scope.agent_id}
    if scope.session_key is not None:
        # A scope naming both a session and an agent needs both to agree.
        cursor = await conn.execute(
            "SELECT id FROM sessions WHERE key = %s AND coalesce(agent_id = %s, true)",
            (scope.session_key, scope.agent_id),
        )
        row = await cursor.fetchone()
        if row is None:
            return []
        params["session_id"] = row[0]
    cursor = await conn.execute(ranked_sql(scope, phrase=phrase is not None), params)
    return [RankedRow(*r) for r in await cursor.fetchall()]


def scores(rows: Sequence[RankedRow]) -> list[float]:
    """Higher-is-better scores (the rank), in the rows' order.

    Phrase matches get the smallest uniform bonus that puts each of them
    above every other result, so the scores agree with the order.
    """
    plain = [float(r.rank) for r in rows]
    best_other = max((s for s, r in zip(plain, rows, strict=True) if not r.phrase), default=None)
    worst_phrase = min((s for s, r in zip(plain, rows, strict=True) if r.phrase), default=None)
    if best_other is None or worst_phrase is None or worst_phrase > best_other:
        return plain
    bonus = best_other - worst_phrase + 1.0
    return [s + bonus if r.phrase else s for s, r in zip(plain, rows, strict=True)]


# --- context around a hit ---------------------------------------------------

# messages_session (session_id, id) walks the session in id order either way.
_CONTEXT = (
    f"SELECT {MESSAGE_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
    f"WHERE s.key = %(key)s AND m.active AND {INDEXED_SQL} "
)
CONTEXT_LATEST = _CONTEXT + "ORDER BY m.id DESC LIMIT %(limit)s"
CONTEXT_BEFORE = _CONTEXT + "AND m.id < %(anchor)s ORDER BY m.id DESC LIMIT %(limit)s"
CONTEXT_FROM = _CONTEXT + "AND m.id >= %(anchor)s ORDER BY m.id LIMIT %(limit)s"


async def _fetch(conn: Connection, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    cursor = await conn.execute(sql, params)
    return list(await cursor.fetchall())


async def context_rows(
    conn: Connection, session_key: str, anchor: int | None, limit: int
) -> list[tuple[Any, ...]]:
    """Rows for Store.messages_around, oldest first."""
    if anchor is None:
        latest = await _fetch(conn, CONTEXT_LATEST, {"key": session_key, "limit": limit})
        return latest[::-1]
    params = {"key": session_key, "anchor": anchor, "limit": limit}
    after = await _fetch(conn, CONTEXT_FROM, params)
    if not after or after[0][0] != anchor:
        # Not a visible message of this session: say nothing about it.
        return []
    before = await _fetch(conn, CONTEXT_BEFORE, params)
    # Centre the anchor; a side with fewer messages leaves its share to the other.
    want_before = (limit - 1) // 2
    want_before = max(want_before, limit - len(after))
    take_before = min(len(before), want_before)
    return before[:take_before][::-1] + after[: limit - take_before]
