"""The search bench's direct view of each backend's database: counts, message
samples, the plain full-text query kept's search is compared with, the
store's own search SQL (diagnostic) and the database's size.

Reads only, on a connection of its own; everything the bench writes goes
through kept's store.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import psycopg

from core.search.query import SearchQuery, build_query
from core.store import SearchScope
from core.store.postgres import search as pg_search
from core.store.postgres.lexemes import query_tsquery, unit_tsquery
from core.store.sqlite import search as sqlite_search
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.fts import AGENT_SPAN


class RawDb(Protocol):
    name: str

    def count(self, query: str, agent: str | None = None) -> int: ...
    def scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any: ...
    def message(self, message_id: int) -> tuple[str, str] | None: ...
    def raw_top(self, parsed: SearchQuery) -> list[int]: ...
    def store_sql(self, parsed: SearchQuery, scope: SearchScope, limit: int) -> float: ...
    def size(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


_MESSAGE = (
    "SELECT s.key, m.text FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.id = ?"
)


class RawSqlite:
    """A second connection to the store's file."""

    name = "sqlite"
    RAW_SQL = (
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? "
        "ORDER BY bm25(messages_fts) LIMIT 10"
    )
    COUNT_SQL = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
    VISIBLE_COUNT_SQL = (
        "SELECT count(*) FROM messages_fts CROSS JOIN messages m "
        f"ON m.id = messages_fts.rowid % {AGENT_SPAN} "
        "WHERE messages_fts MATCH ? AND (SELECT agent_id FROM sessions WHERE id = m.session_id) = ?"
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        # The store's page cache, so both sides read from the same amount of memory.
        self.conn.execute("PRAGMA cache_size = -65536")

    def count(self, query: str, agent: str | None = None) -> int:
        parsed = build_query(query)
        assert parsed is not None, query
        if agent is None:
            return int(self.conn.execute(self.COUNT_SQL, (parsed.expression,)).fetchone()[0])
        row = self.conn.execute(self.VISIBLE_COUNT_SQL, (parsed.expression, agent)).fetchone()
        return int(row[0])

    def scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def message(self, message_id: int) -> tuple[str, str] | None:
        return self.conn.execute(_MESSAGE, (message_id,)).fetchone()

    def raw_top(self, parsed: SearchQuery) -> list[int]:
        rows = self.conn.execute(self.RAW_SQL, (parsed.expression,)).fetchall()
        # Index rowids hold the agent's range; the message id is the rest.
        return [r[0] % AGENT_SPAN for r in rows]

    def store_sql(self, parsed: SearchQuery, scope: SearchScope, limit: int) -> float:
        # What SqliteStore.search runs on its thread, without the tool,
        # service, snippets and thread hops around it.
        t = time.perf_counter()
        sqlite_search.search_rows(self.conn, parsed, scope, limit)
        return (time.perf_counter() - t) * 1000

    def size(self) -> dict[str, Any]:
        try:
            sizes = dict(
                self.conn.execute(
                    "SELECT CASE WHEN d.name LIKE 'messages_fts%' THEN 'fts' "
                    "WHEN s.tbl_name = 'messages' THEN 'messages' ELSE 'other' END, "
                    "sum(d.pgsize) FROM dbstat d LEFT JOIN sqlite_schema s ON s.name = d.name "
                    "GROUP BY 1"
                ).fetchall()
            )
        except sqlite3.DatabaseError:
            # No dbstat in this SQLite build (pysqlite3-binary has none):
            # the total only.
            sizes = None
        path = self.path
        total = sum(
            p.stat().st_size for p in path.parent.glob(path.name + "*") if p.suffix != ".json"
        )
        if sizes is None:
            return _sizes(total, None, None)
        return _sizes(total, sizes.get("fts", 0), sizes.get("messages", 0))

    def close(self) -> None:
        self.conn.close()


def _sizes(total: int, fts: int | None, messages: int | None) -> dict[str, Any]:
    """The database's size, and its parts when they are known (None: not)."""
    if fts is None or messages is None:
        return {"bytes": total, "mb": round(total / 1e6, 1), "fts_mb": None,
                "messages_mb": None, "other_mb": None}  # fmt: skip
    return {
        "bytes": total,
        "mb": round(total / 1e6, 1),
        "fts_mb": round(fts / 1e6, 1),
        "messages_mb": round(messages / 1e6, 1),
        "other_mb": round((total - fts - messages) / 1e6, 1),
    }


class RawPostgres:
    """A second connection to the store's database. The raw query is the
    plain tsquery ranked by ts_rank_cd, as the store's search ranks."""

    name = "postgres"
    RAW_SQL = (
        "SELECT message_id FROM message_search WHERE search @@ %s::tsquery "
        "ORDER BY ts_rank_cd(search, %s::tsquery, 2) DESC LIMIT 10"
    )
    COUNT_SQL = "SELECT count(*) FROM message_search WHERE search @@ %s::tsquery"
    VISIBLE_COUNT_SQL = (
        "SELECT count(*) FROM message_search ms JOIN sessions s ON s.id = ms.session_id "
        "WHERE ms.search @@ %s::tsquery AND s.agent_id = %s"
    )

    def __init__(self, url: str) -> None:
        # As the store's connections: no prepared statements, custom plans.
        self.conn = psycopg.connect(url, autocommit=True, prepare_threshold=None)
        self.conn.execute("SET plan_cache_mode = force_custom_plan")

    def _tsquery(self, parsed: SearchQuery) -> str:
        tsquery = query_tsquery(parsed.units)
        assert tsquery is not None, parsed
        return tsquery

    def count(self, query: str, agent: str | None = None) -> int:
        parsed = build_query(query)
        assert parsed is not None, query
        if agent is None:
            return int(self.scalar(self.COUNT_SQL, (self._tsquery(parsed),)))
        return int(self.scalar(self.VISIBLE_COUNT_SQL, (self._tsquery(parsed), agent)))

    def scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.conn.execute(sql.replace("?", "%s"), params).fetchone()
        return None if row is None else row[0]

    def message(self, message_id: int) -> tuple[str, str] | None:
        return self.conn.execute(_MESSAGE.replace("?", "%s"), (message_id,)).fetchone()

    def raw_top(self, parsed: SearchQuery) -> list[int]:
        tsquery = self._tsquery(parsed)
        return [r[0] for r in self.conn.execute(self.RAW_SQL, (tsquery, tsquery)).fetchall()]

    def store_sql(self, parsed: SearchQuery, scope: SearchScope, limit: int) -> float:
        # The statements PostgresStore.search runs (agent scope: the newest
        # id, then the ranked statement over wider ranges until the window
        # is full), without the tool, service and snippets around them.
        phrase = None if parsed.phrase_unit is None else unit_tsquery(parsed.phrase_unit)
        window = max(pg_search.RANK_WINDOW, 2 * limit)
        params = {"query": self._tsquery(parsed), "phrase": phrase, "limit": limit}
        params |= {"inner_limit": 2 * limit, "window": window, "agent_id": scope.agent_id}
        t = time.perf_counter()
        newest = self.conn.execute(pg_search.newest_sql(scope), params).fetchone()
        if newest is None or newest[0] is None:
            return (time.perf_counter() - t) * 1000
        low = pg_search.first_low(newest[0]) or None
        while True:
            sql = pg_search.ranked_sql(scope, phrase=phrase is not None, bounded=low is not None)
            bounds = pg_search.range_params(scope, low, newest[0])
            filled = self.conn.execute(sql, params | bounds).fetchall()[0][0]
            if low is None or filled >= window:
                break
            low = pg_search.next_low(newest[0], low, filled, window)
        return (time.perf_counter() - t) * 1000

    def size(self) -> dict[str, Any]:
        total = self.scalar("SELECT pg_database_size(current_database())")
        fts = self.scalar("SELECT pg_total_relation_size('message_search')")
        messages = self.scalar("SELECT pg_total_relation_size('messages')")
        return _sizes(int(total), int(fts), int(messages))

    def close(self) -> None:
        self.conn.close()
