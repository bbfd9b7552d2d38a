"""Search and context reads of the SQLite backend, run on its worker thread.

One search is a few statements in one read transaction (a consistent
snapshot, one trip to the thread):

1. The scope is applied inside the ranked query, before its LIMIT, without
   ever listing sessions. A session scope ANDs the session's token into the
   MATCH, so FTS5 intersects posting lists. An agent scope costs nothing when
   the agent owns every session (two index probes tell); otherwise each
   candidate's message and session are looked up by primary key. The joins
   are CROSS JOINs, so SQLite can only start from the full-text index.
   Only active messages have index rows (triggers of migration 0002).
2. A query matching more than RANK_WINDOW messages in its scope (a common
   word) is ranked among its RANK_WINDOW newest matches there: bm25 costs
   about a microsecond per candidate, tens of milliseconds for the commonest
   words of a large database, and for such words the newer messages are the
   better answer anyway. The window is one walk of the index in rowid
   order, with the scope filter applied during the walk and stopped by the
   LIMIT, so bm25 is computed only for the window's rows and no second walk
   is needed to find where the window starts. The window is never smaller
   than what the ranking keeps, so hidden rows cannot shorten the list.
3. Ranking: messages holding the whole query as a phrase first, then bm25,
   then the newest. The ranked query breaks ties by message id (no lookup);
   the outer query reads the winners — twice `limit` of them, so ties at the
   cut are settled by time — re-checks their scope and visibility by primary
   key, and orders them by time, which differs from id order only for
   imported messages.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

from core.search.query import SearchQuery
from core.store.base import INDEXED_KINDS, INDEXED_ROLES, SearchScope
from core.store.fts import BM25, session_filter
from core.store.sqlite_rows import MESSAGE_COLUMNS

RANK_WINDOW = 2500

_IN_ROLES = f"({', '.join(repr(r) for r in sorted(INDEXED_ROLES))})"
_IN_KINDS = f"({', '.join(repr(k) for k in sorted(INDEXED_KINDS))})"
INDEXED_SQL = f"m.role IN {_IN_ROLES} AND m.kind IN {_IN_KINDS}"


class RankedRow(NamedTuple):
    id: int
    session_key: str
    role: str
    ts: int
    text: str
    bm25: float
    phrase: int


# Two probes of sessions_agent: the smallest and largest agent id.
_AGENT_RANGE = "SELECT (SELECT min(agent_id) FROM sessions), (SELECT max(agent_id) FROM sessions)"

_AGENT_OF_M = "(SELECT agent_id FROM sessions WHERE id = m.session_id)"


def _window_sql(*, filter_agent: bool) -> str:
    """The newest :window matches inside the scope, with their bm25.

    One walk of the index in rowid order, stopped by the LIMIT: bm25 is only
    computed for the rows it returns.
    """
    join = where = ""
    if filter_agent:
        # Scalar subqueries look sessions up by primary key: no statistics
        # can turn them into a scan of sessions.
        join = "CROSS JOIN messages m ON m.id = messages_fts.rowid "
        where = f"AND {_AGENT_OF_M} = :agent_id "
    return (
        f"SELECT messages_fts.rowid AS id, {BM25} AS score "
        f"FROM messages_fts {join}WHERE messages_fts MATCH :expr {where}"
        "ORDER BY messages_fts.rowid DESC LIMIT :window"
    )


def _ranked_sql(*, filter_agent: bool, check: str, phrase: bool) -> str:
    """The window (w), its ranking (inner) and the read of its winners (outer)."""
    window = _window_sql(filter_agent=filter_agent)
    if phrase:
        # The phrase flag is a set membership: FTS5 finds the phrase matches
        # inside the window once (no ranking function), SQLite keeps their
        # rowids in a temporary index.
        with_ = f"WITH w AS MATERIALIZED ({window}) "
        source = "w"
        flag = (
            "(w.id IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH :phrase "
            "AND rowid >= (SELECT min(id) FROM w)))"
        )
    else:
        with_ = ""
        source = f"({window}) w"
        flag = "0"
    inner = (
        f"SELECT w.id AS id, w.score AS score, {flag} AS phrase FROM {source} "
        "ORDER BY phrase DESC, score, id DESC LIMIT :inner_limit"
    )
    return (
        f"{with_}SELECT r.id, (SELECT key FROM sessions WHERE id = m.session_id), m.role, m.ts, "
        f"m.text, r.score, r.phrase FROM ({inner}) r CROSS JOIN messages m ON m.id = r.id "
        f"WHERE {check} ORDER BY r.phrase DESC, r.score, m.ts DESC, m.id DESC LIMIT :limit"
    )


def _sql(scope: SearchScope, *, phrase: bool, sole_agent: bool) -> str:
    session = scope.session_key is not None
    agent = not session and scope.agent_id is not None
    # Defence in depth: the winners' scope and visibility are checked again on
    # the messages themselves, so an index row out of step can never show
    # another chat's message (at worst, it shortens the list).
    check = f"m.active = 1 AND {INDEXED_SQL}"
    if session:
        # Unary +: a lookup by primary key, not a seek in messages_session.
        check += " AND +m.session_id = :session_id"
    elif agent:
        check += f" AND {_AGENT_OF_M} = :agent_id"
    return _ranked_sql(filter_agent=agent and not sole_agent, check=check, phrase=phrase)


def search_plan_sql(scope: SearchScope, *, phrase: bool, sole_agent: bool = False) -> str:
    """The ranked statement for `scope` (for EXPLAIN QUERY PLAN tests)."""
    return _sql(scope, phrase=phrase, sole_agent=sole_agent)


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
    sole_agent = False
    if scope.session_key is not None:
        # A scope naming both a session and an agent needs both to agree.
        row = conn.execute(
            "SELECT id FROM sessions WHERE key = ? AND coalesce(agent_id = ?, 1)",
            (scope.session_key, scope.agent_id),
        ).fetchone()
        if row is None:
            return []
        params["session_id"] = row[0]
        # Parenthesised: the user part is an AND chain of column filters.
        expression = f"({expression}) AND {session_filter(row[0])}"
        if phrase is not None:
            phrase = f"({phrase}) AND {session_filter(row[0])}"
    elif scope.agent_id is not None:
        low, high = conn.execute(_AGENT_RANGE).fetchone()
        sole_agent = low == high == scope.agent_id
    params["expr"], params["phrase"] = expression, phrase
    sql = _sql(scope, phrase=phrase is not None, sole_agent=sole_agent)
    return [RankedRow(*r) for r in conn.execute(sql, params).fetchall()]


def scores(rows: Sequence[RankedRow]) -> list[float]:
    """Higher-is-better scores (-bm25), in the rows' order.

    Phrase matches get the smallest uniform bonus that puts each of them
    above every other result, so the scores agree with the order.
    """
    plain = [-r.bm25 for r in rows]
    best_other = max((s for s, r in zip(plain, rows, strict=True) if not r.phrase), default=None)
    worst_phrase = min((s for s, r in zip(plain, rows, strict=True) if r.phrase), default=None)
    if best_other is None or worst_phrase is None or worst_phrase > best_other:
        return plain
    bonus = best_other - worst_phrase + 1.0
    return [s + bonus if r.phrase else s for s, r in zip(plain, rows, strict=True)]


# --- context around a hit ---------------------------------------------------

# messages_session (session_id, id) walks the session in id order either way.
_CONTEXT = (
    f"SELECT {MESSAGE_COLUMNS} FROM sessions s CROSS JOIN messages m ON m.session_id = s.id "
    f"WHERE s.key = :key AND m.active = 1 AND {INDEXED_SQL} "
)
CONTEXT_LATEST = _CONTEXT + "ORDER BY m.id DESC LIMIT :limit"
CONTEXT_BEFORE = _CONTEXT + "AND m.id < :anchor ORDER BY m.id DESC LIMIT :limit"
CONTEXT_FROM = _CONTEXT + "AND m.id >= :anchor ORDER BY m.id LIMIT :limit"


def context_rows(
    conn: sqlite3.Connection, session_key: str, anchor: int | None, limit: int
) -> list[tuple[Any, ...]]:
    """Rows for Store.messages_around, oldest first."""
    if anchor is None:
        latest = conn.execute(CONTEXT_LATEST, {"key": session_key, "limit": limit}).fetchall()
        return latest[::-1]
    params = {"key": session_key, "anchor": anchor, "limit": limit}
    after = conn.execute(CONTEXT_FROM, params).fetchall()
    if not after or after[0][0] != anchor:
        # Not a visible message of this session: say nothing about it.
        return []
    before = conn.execute(CONTEXT_BEFORE, params).fetchall()
    # Centre the anchor; a side with fewer messages leaves its share to the other.
    want_before = (limit - 1) // 2
    want_before = max(want_before, limit - len(after))
    take_before = min(len(before), want_before)
    return before[:take_before][::-1] + after[: limit - take_before]
