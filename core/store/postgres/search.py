"""Search on the PostgreSQL backend's tsvector rows.

A search is one ranked statement, run over a range of the newest ids
first and again over a wider one only when that range held too few matches
(only a full window, or the last, unbounded one, is ranked):

1. The window: the RANK_WINDOW newest search rows (by message id) inside
   the scope that match every unit of the query (`search @@ tsquery`, from
   the GIN index). The scope is applied here, before the LIMIT, so rows
   outside it never take result slots; it is a column of the search row
   (session or agent, steps 2 and 11, search scope), never a join. Only active
   messages have search rows. A common word is ranked among its newest
   matches only: ranking is computed per candidate, and for such words the
   newer messages are the better answer anyway. The window is never
   smaller than what the ranking keeps.
2. Ranking: messages holding the whole query as a phrase first, then
   `ts_rank_cd(search, query, 2)` (cover density, divided by the message's
   length, so a short exact message beats a long one that mentions the word
   in passing, as bm25 does), then the newest by time. The window's rows are
   ranked on their search rows alone; only the winners are read from
   `messages`.
3. The winners' scope and visibility are checked again on the messages
   themselves (defence in depth: a search row out of step can never show
   another chat's message; at worst it shortens the list).

Why ranges of ids. A GIN index answers "which rows hold these lexemes" but
not in any order, so the window's LIMIT cannot stop the scan early: every
match is read from the table (and, for a phrase, a prefix match or a Thai
word, whose lexemes' positions only the row holds, checked there) before
the newest are kept. For a word in every tenth message that is most of the
table. So a search first looks at the newest FIRST_SPAN ids only,
and again over a wider range only when that one held fewer matches than the
window wants; the next range is sized from the density of matches just
seen, and the last one has no bound. The answer is the same as one
unbounded statement's: a full window inside a range holds the newest
matches of the whole scope. A rare word pays one extra trip over index
entries.

How a scope and a range are applied. An agent scope names the agent's
lexeme, or its spans of ids in the range (step 11, search scope: every search row
has `<agent>` and `<agent>:<message_id >> SPAN_BITS>` in a second column of
the same GIN index), so the index itself intersects the query's lexemes
with them and only the agent's rows in the range are read. A b-tree range
(`message_id >= low`) ANDed with the GIN bitmap would do the same only when
the planner chooses it, and its row estimates for a phrase of bigrams (whose
lexemes always come together) are far too low for it to. A session scope
and the global one bound the range with their b-tree
(message_search_session, the primary key): a session is a small part of
the table whichever plan is picked.

Every statement is planned for its own values (never prepared, see
connection.py): a generic plan could walk the whole primary key instead of
the GIN index.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from core.search.query import SearchQuery
from core.store.base import RANK_WINDOW, SearchScope
from core.store.postgres.connection import Connection
from core.store.postgres.lexemes import query_tsquery, quote_lexeme, unit_tsquery
from core.store.sql.transcript import INDEXED_SQL

# Ids a search looks back over first; the next range is this much more
# than the density of matches seen asks for, so one retry usually does.
FIRST_SPAN = 1 << 16
WIDEN_MARGIN = 1.25
# A range that would cover more than this share of all ids is not worth
# naming span by span: the last statement has no bound.
UNBOUNDED_SHARE = 0.75
# Ids per span lexeme, as step 11 (search scope) builds them.
SPAN_BITS = 14


class RankedRow(NamedTuple):
    id: int
    session_key: str
    role: str
    ts: datetime
    text: str
    rank: float
    phrase: bool


def _scope_terms(scope: SearchScope, *, bounded: bool) -> tuple[str, str]:
    """(the search rows' scope condition, the messages' check)."""
    if scope.session_key is not None:
        where, check = "AND ms.session_id = %(session_id)s ", "AND m.session_id = %(session_id)s "
    elif scope.agent_id is not None:
        where, check = "AND ms.agent_id = %(agent_id)s ", "AND s.agent_id = %(agent_id)s "
        # The id bound as well when bounded, so a plan walking the agent's
        # b-tree backwards stops at the range too.
        where += "AND ms.span @@ %(spans)s::tsquery "
    else:
        where = check = ""
    return where + ("AND ms.message_id >= %(low)s " if bounded else ""), check


def ranked_sql(scope: SearchScope, *, phrase: bool, bounded: bool = False) -> str:
    """The ranked statement for a search in `scope`: the window's size, then
    the ranked winners (one row with NULLs after the size when none).
    `bounded` limits the window to ids from %(low)s on (for an agent, to
    the spans %(spans)s, see span_tsquery)."""
    window_scope, check = _scope_terms(scope, bounded=bounded)
    flag = "w.search @@ %(phrase)s::tsquery" if phrase else "false"
    # A bounded window that is not full is only counted: the next, wider
    # range replaces it.
    final = "(SELECT count(*) FROM w) >= %(window)s" if bounded else "true"
    # Only a bounded window's size decides anything.
    filled = "(SELECT count(*) FROM w)" if bounded else "NULL::bigint"
    return (
        "WITH w AS MATERIALIZED (SELECT ms.message_id, ms.search FROM message_search ms "
        f"WHERE ms.search @@ %(query)s::tsquery {window_scope}"
        "ORDER BY ms.message_id DESC LIMIT %(window)s), "
        # Ranked on the search rows alone, ties broken by id; only the
        # winners (twice `limit`, so ties at the cut are settled by time)
        # are read from messages.
        f"r AS (SELECT w.message_id, ts_rank_cd(w.search, %(query)s::tsquery, 2) AS rank, "
        f"{flag} AS phrase FROM w WHERE {final} "
        "ORDER BY phrase DESC, rank DESC, w.message_id DESC LIMIT %(inner_limit)s), "
        "f AS (SELECT m.id, s.key, m.role, m.ts, m.text, r.rank, r.phrase "
        "FROM r JOIN messages m ON m.id = r.message_id JOIN sessions s ON s.id = m.session_id "
        f"WHERE m.active AND {INDEXED_SQL} {check}"
        "ORDER BY r.phrase DESC, r.rank DESC, m.ts DESC, m.id DESC LIMIT %(limit)s) "
        f"SELECT c.filled, f.* FROM (SELECT {filled} AS filled) c LEFT JOIN f ON true "
        "ORDER BY f.phrase DESC, f.rank DESC, f.ts DESC, f.id DESC"
    )


def newest_sql(scope: SearchScope) -> str:
    """The newest search row's id in `scope` (NULL when it has none)."""
    # An agent's ranges start from the newest id of all: an agent that has
    # been quiet for a while finds nothing there and goes to no bound.
    where = "WHERE ms.session_id = %(session_id)s" if scope.session_key is not None else ""
    return f"SELECT max(ms.message_id) FROM message_search ms {where}"


def span_tsquery(agent_id: str, low: int, newest: int) -> str:
    """The agent's span lexemes from `low` on, ORed: up to the span after
    the newest id's, so a row stored meanwhile is not left out."""
    spans = range(low >> SPAN_BITS, (newest >> SPAN_BITS) + 2)
    return " | ".join(quote_lexeme(f"{agent_id}:{span}") for span in spans)


def first_low(newest: int) -> int:
    return max(0, newest - FIRST_SPAN + 1) >> SPAN_BITS << SPAN_BITS


def next_low(newest: int, low: int, filled: int, window: int) -> int | None:
    """The next range's lower bound after ids [low, newest] held `filled`
    of the `window` matches wanted; None for no bound."""
    if filled == 0:
        return None
    wanted = int((newest - low + 1) * window / filled * WIDEN_MARGIN)
    if wanted >= UNBOUNDED_SHARE * newest:
        return None
    return (newest - wanted + 1) >> SPAN_BITS << SPAN_BITS or None


def range_params(scope: SearchScope, low: int | None, newest: int) -> dict[str, Any]:
    agent = scope.agent_id if scope.session_key is None else None
    if agent is not None:
        # Unbounded, the agent's own lexeme: every span of it.
        spans = quote_lexeme(agent) if low is None else span_tsquery(agent, low, newest)
        return {"low": low, "spans": spans}
    return {"low": low}


async def search_rows(
    conn: Connection, query: SearchQuery, scope: SearchScope, limit: int
) -> list[RankedRow]:
    """The best `limit` rows for `query` inside `scope`."""
    tsquery = query_tsquery(query.units)
    if tsquery is None:
        return []
    phrase = None if query.phrase_unit is None else unit_tsquery(query.phrase_unit)
    window = max(RANK_WINDOW, 2 * limit)
    params: dict[str, Any] = {"query": tsquery, "phrase": phrase, "limit": limit}
    params |= {"inner_limit": 2 * limit, "window": window, "agent_id": scope.agent_id}
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
    cursor = await conn.execute(newest_sql(scope), params)
    found = await cursor.fetchone()
    if found is None or found[0] is None:
        return []
    newest = int(found[0])
    low = first_low(newest) or None
    while True:
        sql = ranked_sql(scope, phrase=phrase is not None, bounded=low is not None)
        cursor = await conn.execute(sql, params | range_params(scope, low, newest))
        rows = await cursor.fetchall()
        if low is None or rows[0][0] >= window:
            return [RankedRow(*r[1:]) for r in rows if r[1] is not None]
        low = next_low(newest, low, rows[0][0], window)
