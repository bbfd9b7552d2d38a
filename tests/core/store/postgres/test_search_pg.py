"""PostgreSQL's own side of search: the tsvector is built by kept's
normaliser (not PostgreSQL's parser), searches start from the GIN index, and
the search rows follow hiding, showing and drift the way SQLite's FTS5 rows
do (tests/core/search/ holds the behaviour both backends share)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from core.search.query import build_query
from core.store import ImportRow, SearchScope
from core.store.base import INDEXED_KINDS, INDEXED_ROLES
from core.store.postgres import PostgresStore
from core.store.postgres.lexemes import document_lexemes, query_tsquery, tsvector_literal
from core.store.postgres.migrations import m0021_limits
from core.store.postgres.search import RANK_WINDOW, ranked_sql
from tests.core.store.test_contract import KEY, OTHER, T0, add, add_session, ids, search
from tests.support import pg_helpers
from tests.support.store_helpers import open_any_store

A2 = "agent:a:telegram:group:200"
B1 = "agent:b:discord:private:300"


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    opened = open_any_store(postgres_url)
    assert isinstance(opened, PostgresStore)
    async with opened:
        for key in (KEY, OTHER, B1):
            await add_session(opened, key)
        yield opened


async def stored_lexemes(store: PostgresStore, message_id: int) -> set[str]:
    rows = await store.connection.fetchall(
        "SELECT unnest(tsvector_to_array(search)) FROM message_search WHERE message_id = %s",
        (message_id,),
    )
    return {r[0] for r in rows}


# --- the tsvector is kept's -----------------------------------------------------


async def test_thai_is_not_split_at_vowel_marks(store: PostgresStore) -> None:
    record = await add(store, "กินข้าว हिन्दी")
    lexemes = await stored_lexemes(store, record.id)
    # Bigrams with their marks, Devanagari whole, as the SQLite index holds them.
    assert {"กิ", "ข้", "้า", "าว", "ว", "हिन्दी"} <= lexemes
    assert "ข" not in lexemes and "ह" not in lexemes
    # PostgreSQL's own parser would have cut them at the marks.
    own = await store.connection.fetchall(
        "SELECT unnest(tsvector_to_array(to_tsvector('simple', %s)))", ("กินข้าว हिन्दी",)
    )
    assert {r[0] for r in own} != lexemes
    assert ids(await search(store, "ข้าว")) == [record.id]
    assert ids(await search(store, "हिन्दी")) == [record.id]


async def test_the_stored_tsvector_is_the_normalisers_output(store: PostgresStore) -> None:
    text = "Une ÉCOLE à İstanbul, 東京都 ｆｕｌｌ ﬁne كَتَبَ"
    record = await add(store, text)
    rows = await store.connection.fetchall(
        "SELECT search = %s::tsvector FROM message_search WHERE message_id = %s",
        (tsvector_literal(text), record.id),
    )
    assert rows == [(True,)]
    lexemes = await stored_lexemes(store, record.id)
    assert {"une", "ecole", "a", "istanbul", "東京", "京都", "都", "full", "fine"} <= lexemes
    assert "\u06a9تب" in lexemes  # harakat dropped, Arabic kaf folded


def test_words_then_grams_take_positions() -> None:
    # The run 東京 leaves the word column (blanked), its grams follow the words.
    assert document_lexemes("new york 東京 new") == {
        "new": [1, 3], "york": [2], "東京": [4], "京": [5],
    }  # fmt: skip


def test_query_lexemes_are_quoted_and_folded() -> None:
    query = build_query('O\'Brien école* "new york" 北')
    assert query is not None
    tsquery = query_tsquery(query.units)
    assert tsquery == "('o' <-> 'brien') & ('ecole':*) & ('new' <-> 'york') & ('北':*)"


async def test_odd_lexemes_never_break_the_literals(store: PostgresStore) -> None:
    word = "x" * 3000  # past PostgreSQL's 2046-byte lexeme limit
    record = await add(store, f"{word} back\\slash it's")
    assert ids(await search(store, word)) == [record.id]
    assert ids(await search(store, "slash")) == [record.id]
    assert ids(await search(store, "it's")) == [record.id]
    many = await add(store, " ".join(["same"] * 20_000) + " tail")
    assert ids(await search(store, "tail")) == [many.id]


def test_the_migration_indexes_what_the_store_indexes() -> None:
    def listed(sql: str) -> set[str]:
        return {part.strip(" '") for part in sql.strip("()").split(",")}

    assert listed(m0021_limits.ROLES_SQL) == INDEXED_ROLES
    assert listed(m0021_limits.KINDS_SQL) == INDEXED_KINDS


# --- plans ------------------------------------------------------------------------


async def explain(store: PostgresStore, sql: str, params: dict[str, Any]) -> str:
    async with store.connection.connection() as conn:
        cursor = await conn.execute(f"EXPLAIN {sql}", params)
        return "\n".join(r[0] for r in await cursor.fetchall())


async def test_searches_start_from_the_gin_index(store: PostgresStore) -> None:
    rows = [
        ImportRow((KEY, OTHER, B1)[i % 3], "user", f"filler message {i} about the weather", T0)
        for i in range(1200)
    ]
    rows.append(ImportRow(KEY, "user", "the rare zeppelin", T0))
    await store.import_messages(rows)
    for key in (KEY, OTHER, B1):
        await store.reindex_session(key)
    while await store.compact_index():
        pass
    await pg_helpers.execute(store, "ANALYZE")
    session_id = (await store.get_session(KEY)).id  # type: ignore[union-attr]
    query = build_query("zeppelin")
    assert query is not None
    params = {"query": query_tsquery(query.units), "phrase": None, "limit": 10, "inner_limit": 20}
    params |= {"window": RANK_WINDOW, "agent_id": "a", "session_id": session_id, "spans": "'a'"}
    for scope in (SearchScope(session_key=KEY), SearchScope(agent_id="a"), SearchScope()):
        plan = await explain(store, ranked_sql(scope, phrase=False), params)
        assert "message_search_words" in plan, plan
        assert "Seq Scan on message_search" not in plan, plan
    assert len(await search(store, "zeppelin", agent="a")) == 1


# --- search rows follow the messages ----------------------------------------------


async def test_hiding_drops_the_row_and_showing_puts_the_session_behind(
    store: PostgresStore,
) -> None:
    record = await add(store, "now you see me")
    await pg_helpers.deactivate(store, record.id)
    assert await pg_helpers.count_index_rows(store) == 0
    assert await store.sessions_behind() == []
    await pg_helpers.execute(store, "UPDATE messages SET active = true WHERE id = %s", (record.id,))
    assert await store.sessions_behind() == [KEY]
    assert await store.reindex_session(KEY) == 1
    assert ids(await search(store, "see")) == [record.id]


async def test_consistency_notices_every_kind_of_drift(store: PostgresStore) -> None:
    record = await add(store, "drifting")
    other = await add(store, "elsewhere", key=OTHER)
    await pg_helpers.execute(
        store, "DELETE FROM message_search WHERE message_id = %s", (record.id,)
    )
    assert await pg_helpers.index_consistency(store) == (1, 0)
    assert await pg_helpers.index_consistency(store, KEY) == (1, 0)
    assert await pg_helpers.index_consistency(store, OTHER) == (0, 0)
    # A row claiming the wrong session is both missing and orphaned, and so
    # is a row with stale lexemes.
    await pg_helpers.execute(
        store,
        "INSERT INTO message_search(message_id, session_id, agent_id, search) "
        "VALUES (%s, %s, 'a', 'drifting')",
        (record.id, other.session_id),
    )
    await pg_helpers.execute(
        store, "UPDATE message_search SET search = 'stale' WHERE message_id = %s", (other.id,)
    )
    assert await pg_helpers.index_consistency(store) == (2, 2)
    assert await pg_helpers.index_consistency(store, KEY) == (1, 1)
    assert await pg_helpers.index_consistency(store, OTHER) == (1, 2)
    assert await store.reindex_session(KEY) == 1
    assert await store.reindex_session(OTHER) == 1
    assert await pg_helpers.index_consistency(store) == (0, 0)


async def test_compaction_folds_the_pending_list(store: PostgresStore) -> None:
    await pg_helpers.execute(store, "ALTER TABLE message_search SET (autovacuum_enabled = false)")
    rows = [
        ImportRow(KEY, "user", f"pending words {i}", T0 + timedelta(seconds=i)) for i in range(200)
    ]
    await store.import_messages(rows)
    await store.reindex_session(KEY)
    assert await store.compact_index() is True
    assert await store.compact_index() is False
    assert len(await search(store, "pending", limit=250)) == 200
