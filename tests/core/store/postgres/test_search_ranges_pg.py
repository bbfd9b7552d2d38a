"""How a PostgreSQL search bounds its work: search rows carry their agent
(migration 0011), and a search reads the newest range of ids first, wider
ones only while its window is not full, with the same answer as one
unbounded statement (core/store/postgres/search.py)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from core.search.query import build_query
from core.store import ImportRow, SearchScope
from core.store.postgres import PostgresStore
from core.store.postgres import search as pg_search
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.lexemes import tsvector_literal
from core.store.postgres.migrations import load_migrations, m0011_search_scope
from tests.core.store.test_contract import (
    KEY,
    OTHER,
    REDACTOR,
    T0,
    add,
    add_session,
    ids,
    search,
)
from tests.support import pg_helpers
from tests.support.postgres import fresh_database
from tests.support.store_helpers import open_any_store

B1 = "agent:b:discord:private:300"
SESSIONS = (KEY, OTHER, B1)


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    opened = open_any_store(postgres_url)
    assert isinstance(opened, PostgresStore)
    async with opened:
        for key in SESSIONS:
            await add_session(opened, key)
        yield opened


async def fill(store: PostgresStore, blocks: int) -> None:
    """Blocks of 150 imported and indexed messages, 50 per session, each
    block starting 8,192 ids after the last (so a range of ids crosses
    spans as it would in a busy database): a common word everywhere, rarer
    words, phrases and ideographs now and then, and the best (shortest)
    matches among the oldest."""
    await store.import_messages(
        [ImportRow(KEY, "user", "common", T0), ImportRow(B1, "user", "rare pair", T0)]
    )
    for block in range(blocks):
        await pg_helpers.execute(
            store,
            "SELECT setval(pg_get_serial_sequence('messages', 'id'), %s)",
            ((block + 1) * 8192,),
        )
        for number, key in enumerate(SESSIONS):
            rows = []
            for j in range(50):
                i = block * 150 + number * 50 + j
                words = ["common", f"word{i % 7}"]
                if i % 5 == 0:
                    words.append("rare pair" if i % 2 else "pair rare")
                if i % 11 == 0:
                    words.append("北京天气")
                words.append(f"filler {i} of a longer message")
                at = T0 + timedelta(seconds=i + 1)
                rows.append(ImportRow(key, ("user", "assistant")[i % 2], " ".join(words), at))
            await store.import_messages(rows)
    for key in SESSIONS:
        await store.reindex_session(key)
    await pg_helpers.execute(store, "ANALYZE")


QUERIES = ("common", "word3", "rare pair", '"rare pair"', "comm*", "北", "北京", "nothing")
SCOPES = (
    SearchScope(session_key=KEY),
    SearchScope(agent_id="a"),
    SearchScope(agent_id="b"),
    SearchScope(agent_id="nobody"),
    SearchScope(),
)


async def test_every_range_gives_the_unbounded_answer(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fill(store, 8)
    monkeypatch.setattr(pg_search, "RANK_WINDOW", 40)

    async def answers() -> list[list[tuple[int, float]]]:
        found = []
        for query in QUERIES:
            for scope in SCOPES:
                for limit in (3, 30):
                    hits = await store.search(query, scope=scope, limit=limit, redactor=REDACTOR)
                    found.append([(h.message_id, h.score) for h in hits])
        return found

    monkeypatch.setattr(pg_search, "FIRST_SPAN", 1 << 40)  # one unbounded statement
    unbounded = await answers()
    assert sum(map(len, unbounded)) > 300
    for span in (1, 20_000, 50_000):
        monkeypatch.setattr(pg_search, "FIRST_SPAN", span)
        assert await answers() == unbounded, span


class Recorder:
    """A connection that remembers the statements run on it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[tuple[str, dict[str, Any]]] = []

    async def execute(self, query: str, params: Any = None) -> Any:
        if isinstance(params, dict):
            self.statements.append((query, params))
        return await self.conn.execute(query, params)


def rows_read(plan: Any, relation: str) -> int:
    """Rows the plan took from `relation`, before its filters dropped any."""
    total = 0
    if plan.get("Relation Name") == relation and "Actual Rows" in plan:
        total += plan["Actual Rows"] * plan.get("Actual Loops", 1)
        for removed in ("Rows Removed by Filter", "Rows Removed by Index Recheck"):
            total += plan.get(removed, 0)
    for child in plan.get("Plans", []):
        total += rows_read(child, relation)
    return total


async def test_a_frequent_word_reads_only_its_newest_range(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fill(store, 20)
    monkeypatch.setattr(pg_search, "RANK_WINDOW", 20)
    monkeypatch.setattr(pg_search, "FIRST_SPAN", 1)
    query = build_query("word3")  # in every seventh message
    assert query is not None
    for scope in (SearchScope(agent_id="a"), SearchScope(session_key=KEY), SearchScope()):
        async with store.connection.connection() as conn:
            recorder = Recorder(conn)
            rows = await pg_search.search_rows(recorder, query, scope, 10)  # type: ignore[arg-type]
            assert len(rows) == 10
            ranked = [(s, p) for s, p in recorder.statements if "ts_rank_cd" in s]
            for statement, params in ranked:
                # Every statement has a bound (the window fills before the
                # last resort), and reads no row older than it.
                assert params["low"] is not None, (scope, len(ranked))
                cursor = await conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params)
                explained = (await cursor.fetchone())[0]  # type: ignore[index]
                plan = explained if isinstance(explained, list) else json.loads(explained)
                read = rows_read(plan[0]["Plan"], "message_search")
                cursor = await conn.execute(
                    "SELECT count(*) FROM message_search WHERE message_id >= %s", (params["low"],)
                )
                (in_range,) = await cursor.fetchone()  # type: ignore[misc]
                assert 0 < read <= in_range < 3000, (scope, read, in_range)


async def test_search_rows_carry_their_sessions_agent(store: PostgresStore) -> None:
    await fill(store, 1)
    live = await add(store, "edit me", platform_message_id="p1")
    await add(store, "agent b speaks", key=B1)
    await store.edit_message(
        platform="telegram", chat_id="100", platform_message_id="p1", text="edited"
    )
    rows = await store.connection.fetchall(
        "SELECT ms.agent_id, s.agent_id, count(*) FROM message_search ms "
        "JOIN sessions s ON s.id = ms.session_id GROUP BY 1, 2 ORDER BY 1"
    )
    assert rows == [("a", "a", 102), ("b", "b", 52)]
    assert ids(await search(store, "edited", agent="a")) == [live.id]
    assert await search(store, "edited", agent="b") == []


async def explain(store: PostgresStore, statement: str, params: dict[str, Any]) -> str:
    async with store.connection.connection() as conn:
        cursor = await conn.execute(f"EXPLAIN {statement}", params)
        return "\n".join(r[0] for r in await cursor.fetchall())


def cte_plan(plan: str, name: str) -> str:
    """The lines of one CTE's plan in a text EXPLAIN."""
    lines = plan.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"CTE {name}")

    def depth(line: str) -> int:
        return len(line) - len(line.lstrip())

    after = range(start + 1, len(lines))
    end = next((i for i in after if depth(lines[i]) <= depth(lines[start])), len(lines))
    return "\n".join(lines[start:end])


async def test_a_bounded_search_starts_from_its_scopes_range(store: PostgresStore) -> None:
    await fill(store, 20)
    session_id = (await store.get_session(KEY)).id  # type: ignore[union-attr]
    newest = (await store.connection.fetchall("SELECT max(message_id) FROM message_search"))[0][0]
    params = {"query": "'common'", "phrase": None, "limit": 10, "inner_limit": 20}
    params |= {"window": 20, "agent_id": "a", "session_id": session_id}
    low = pg_search.first_low(newest)
    for scope in (SearchScope(agent_id="a"), SearchScope(session_key=KEY), SearchScope()):
        bounded = params | pg_search.range_params(scope, low, newest)
        statement = pg_search.ranked_sql(scope, phrase=False, bounded=True)
        window = cte_plan(await explain(store, statement, bounded), "w")
        assert "Seq Scan" not in window and "sessions" not in window, window
        # Whichever index it starts from, the range is a condition of the
        # index scan, not a filter on rows already read.
        conditions = [line for line in window.splitlines() if "Index Cond:" in line]
        assert any("message_id >=" in c or "span @@" in c for c in conditions), window


async def test_span_lexemes_are_the_same_in_sql_and_python(store: PostgresStore) -> None:
    assert pg_search.SPAN_BITS == m0011_search_scope.SPAN_BITS
    await pg_helpers.execute(
        store, "SELECT setval(pg_get_serial_sequence('messages', 'id'), %s)", (3 << 14,)
    )
    first = await add(store, "one")
    await pg_helpers.execute(
        store, "SELECT setval(pg_get_serial_sequence('messages', 'id'), %s)", ((5 << 14) - 1,)
    )
    last = await add(store, "two", key=B1)
    assert (first.id >> 14, last.id >> 14) == (3, 5)

    async def matches(agent: str, low: int, newest: int) -> list[int]:
        rows = await store.connection.fetchall(
            "SELECT message_id FROM message_search WHERE span @@ %s::tsquery ORDER BY 1",
            (pg_search.span_tsquery(agent, low, newest),),
        )
        return [r[0] for r in rows]

    assert await matches("a", first.id, first.id) == [first.id]
    assert await matches("a", last.id, last.id) == []
    assert await matches("b", first.id, first.id) == []
    assert await matches("b", 0, first.id) == []
    # The span after the newest id's is included: a row stored meanwhile.
    assert await matches("b", 0, last.id - (1 << 14)) == [last.id]


# --- migration 0011 -----------------------------------------------------------------


@pytest.fixture
def fresh_url(postgres_server: str) -> Iterator[str]:
    with fresh_database(postgres_server, "kept_m0011_backfill") as url:
        yield url


async def test_migration_0011_gives_existing_rows_their_agent(fresh_url: str) -> None:
    before = PostgresConnection(fresh_url, migrations=load_migrations()[:10])
    await before.open()
    await before.close()
    texts = {KEY: "alpha in a", OTHER: "beta in a", B1: "alpha in b"}
    with psycopg.connect(fresh_url, autocommit=True) as conn:
        for key, text in texts.items():
            agent, platform, kind, chat = key.split(":")[1:5]
            session_id = conn.execute(
                "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, created_at, "
                "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (key, agent, platform, chat, kind, T0, T0),
            ).fetchone()[0]  # type: ignore[index]
            message_id = conn.execute(
                "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, ts) "
                "VALUES (%s, %s, %s, 'user', 'text', %s, %s) RETURNING id",
                (session_id, platform, chat, text, T0),
            ).fetchone()[0]  # type: ignore[index]
            conn.execute(
                "INSERT INTO message_search(message_id, session_id, search) "
                "VALUES (%s, %s, %s::tsvector)",
                (message_id, session_id, tsvector_literal(text)),
            )
    migrated = open_any_store(fresh_url)
    assert isinstance(migrated, PostgresStore)
    async with migrated:
        assert await migrated.schema_version() >= 11
        rows = await migrated.connection.fetchall(
            "SELECT s.key, ms.agent_id FROM message_search ms "
            "JOIN sessions s ON s.id = ms.session_id ORDER BY s.key"
        )
        assert rows == sorted((key, key.split(":")[1]) for key in texts)
        assert len(await search(migrated, "alpha", agent="a")) == 1
        assert len(await search(migrated, "alpha", agent="b")) == 1
        assert len(await search(migrated, "alpha")) == 2
        indexes = dict(
            await migrated.connection.fetchall(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'message_search'"
            )
        )
        assert set(indexes) == {
            "message_search_pkey", "message_search_words", "message_search_session"
        }  # fmt: skip
        assert re.search(r"gin_pending_list_limit='?\d+", indexes["message_search_words"])
        # The rows still go with their message.
        await pg_helpers.execute(migrated, "DELETE FROM messages WHERE text = 'beta in a'")
        assert await pg_helpers.count_index_rows(migrated) == 2
