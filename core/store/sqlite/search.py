"""Search on the SQLite backend's FTS5 index, run on its worker thread.

One search is a few statements in one read transaction (a consistent
snapshot, one trip to the thread):

1. The scope is applied inside the ranked query, before its LIMIT, without
   ever listing sessions. Each agent's index rows form one rowid range
   (core/store/sqlite/fts.py), so an agent scope is a rowid range that FTS5 seeks
   to in every posting list: other agents' rows are never read. A session
   scope adds the session's token to the MATCH, so FTS5 intersects posting
   lists. The admin's unscoped search runs the query once per agent and
   merges the results (bm25 comes from one table, so scores compare).
   Only active messages have index rows (triggers of steps 2 and 6).
2. A query matching more than RANK_WINDOW messages in its scope (a common
   word) is ranked among its RANK_WINDOW newest matches there: bm25 is
   computed per candidate, which adds up for the commonest words of a large
   database, and for such words the newer messages are the better answer
   anyway. The window is one walk of the index range in
   rowid order, stopped by the LIMIT, so bm25 is computed only for the
   window's rows. The window is never smaller than what the ranking keeps,
   so hidden rows cannot shorten the list.
3. Ranking: messages holding the whole query as a phrase first, then bm25,
   then the newest. The ranked query breaks ties by message id (no lookup);
   the outer query reads the winners — twice `limit` of them, so ties at the
   cut are settled by time — re-checks their scope and visibility by primary
   key, and orders them by time, which differs from id order only for
   imported messages.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from core.search.query import SearchQuery
from core.store.base import RANK_WINDOW, SearchScope
from core.store.sql.transcript import INDEXED_SQL
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.fts import AGENT_SPAN, BM25, agent_range, session_filter

__all__ = ["INDEXED_SQL", "RankedRow", "ranked_sql", "search_rows"]


class RankedRow(NamedTuple):
    id: int
    session_key: str
    role: str
    ts: int
    text: str
    bm25: float
    phrase: int


_AGENT_OF_M = "(SELECT agent_id FROM sessions WHERE id = m.session_id)"

# The newest :window matches in one agent's rowid range, with their bm25:
# one walk of the range in rowid order, stopped by the LIMIT, so bm25 is
# only computed for the rows it returns.
WINDOW_SQL = (
    f"SELECT messages_fts.rowid AS fid, {BM25} AS score FROM messages_fts "
    "WHERE messages_fts MATCH :expr AND messages_fts.rowid >= :low AND messages_fts.rowid < :high "
    "ORDER BY messages_fts.rowid DESC LIMIT :window"
)


def _ranked_sql(*, check: str, phrase: bool) -> str:
    """The window (w), its ranking (inner) and the read of its winners (outer)."""
    if phrase:
        # The phrase flag is a set membership: FTS5 finds the phrase matches
        # inside the window once (no ranking function), SQLite keeps their
        # rowids in a temporary index.
        with_ = f"WITH w AS MATERIALIZED ({WINDOW_SQL}) "
        source = "w"
        flag = (
            "(w.fid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH :phrase "
            "AND rowid >= (SELECT min(fid) FROM w) AND rowid < :high))"
        )
    else:
        with_ = ""
        source = f"({WINDOW_SQL}) w"
        flag = "0"
    inner = (
        f"SELECT w.fid % {AGENT_SPAN} AS id, w.score AS score, {flag} AS phrase FROM {source} "
        "ORDER BY phrase DESC, score, id DESC LIMIT :inner_limit"
    )
    return (
        f"{with_}SELECT r.id, (SELECT key FROM sessions WHERE id = m.session_id), m.role, m.ts, "
        f"m.text, r.score, r.phrase FROM ({inner}) r CROSS JOIN messages m ON m.id = r.id "
        f"WHERE {check} ORDER BY r.phrase DESC, r.score, m.ts DESC, m.id DESC LIMIT :limit"
    )


def ranked_sql(scope: SearchScope, *, phrase: bool) -> str:
    """The ranked statement for a search in `scope`."""
    # Defence in depth: the winners' scope and visibility are checked again on
    # the messages themselves, so an index row out of step can never show
    # another chat's message (at worst, it shortens the list).
    check = f"m.active = 1 AND {INDEXED_SQL}"
    if scope.session_key is not None:
        # Unary +: a lookup by primary key, not a seek in messages_session.
        check += " AND +m.session_id = :session_id"
    elif scope.agent_id is not None:
        check += f" AND {_AGENT_OF_M} = :agent_id"
    return _ranked_sql(check=check, phrase=phrase)


def _ranked_key(row: RankedRow) -> tuple[int, float, int, int]:
    return -row.phrase, row.bm25, -row.ts, -row.id


def search_rows(
    conn: sqlite3.Connection, query: SearchQuery, scope: SearchScope, limit: int
) -> list[RankedRow]:
    """The best `limit` rows for `query` inside `scope`."""
    # The window is never smaller than the rows the ranking keeps, so it
    # cannot shorten the list.
    params: dict[str, Any] = {"limit": limit, "inner_limit": 2 * limit}
    params |= {"window": max(RANK_WINDOW, 2 * limit)}
    params |= {"session_id": None, "agent_id": scope.agent_id}
    expression, phrase = query.expression, query.phrase
    if scope.session_key is not None:
        # A scope naming both a session and an agent needs both to agree.
        row = conn.execute(
            "SELECT id, agent_slot FROM sessions WHERE key = ? AND coalesce(agent_id = ?, 1)",
            (scope.session_key, scope.agent_id),
        ).fetchone()
        if row is None:
            return []
        params["session_id"], slots = row[0], [row[1]]
        # Parenthesised: the user part is an AND chain of column filters.
        expression = f"({expression}) AND {session_filter(row[0])}"
        if phrase is not None:
            phrase = f"({phrase}) AND {session_filter(row[0])}"
    elif scope.agent_id is not None:
        sql = "SELECT slot FROM agents WHERE agent_id = ?"
        slots = [r[0] for r in conn.execute(sql, (scope.agent_id,))]
    else:
        slots = [r[0] for r in conn.execute("SELECT slot FROM agents ORDER BY slot")]
    params["expr"], params["phrase"] = expression, phrase
    sql = ranked_sql(scope, phrase=phrase is not None)
    rows: list[RankedRow] = []
    for slot in slots:
        params["low"], params["high"] = agent_range(slot)
        rows += [RankedRow(*r) for r in conn.execute(sql, params).fetchall()]
    if len(slots) > 1:
        rows = sorted(rows, key=_ranked_key)[:limit]
    return rows
