"""The full-text index through Store.search: languages, ranking, visibility,
redaction (on both backends), and SQLite's FTS5 rows and query plans (the
PostgreSQL equivalents are in tests/core/store/postgres/test_search_pg.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.search.ngrams import run_tokens, split_columns
from core.search.normalize import normalize
from core.search.query import build_query
from core.search.redact import Redactor
from core.store import SearchScope, Store
from core.store.dialect import SQLITE
from core.store.postgres import PostgresStore
from core.store.postgres import search as pg_search
from core.store.sql.transcript import transcript_sql
from core.store.sqlite import SqliteStore
from core.store.sqlite import search as sqlite_search
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.fts import AGENT_SPAN, TOKENIZE, agent_range, session_filter
from tests.core.store.test_contract import T0, add, add_session, deactivate, ids, msg, search
from tests.support.search_corpus import MESSAGES, NO_HITS, TOP_HITS
from tests.support.store_helpers import open_any_store, search_plan_sql

KEY = "agent:a:telegram:private:100"
A2 = "agent:a:telegram:group:200"
B1 = "agent:b:discord:private:300"


@pytest.fixture
async def store(storage_url: str) -> AsyncIterator[Store]:
    """Each backend's store."""
    async with open_any_store(storage_url) as opened:
        for key in (KEY, A2, B1):
            await add_session(opened, key)
        yield opened


@pytest.fixture
async def lite(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """The SQLite store, for checks of its FTS5 rows and query plans."""
    async with SqliteStore(tmp_path / "kept.sqlite") as opened:
        for key in (KEY, A2, B1):
            await add_session(opened, key)
        yield opened


@pytest.fixture
async def corpus(store: Store) -> dict[str, int]:
    found: dict[str, int] = {}
    for at, (name, text) in enumerate(MESSAGES.items()):
        found[name] = (await add(store, text, at=at)).id
    return found


# --- n-grams ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words", "grams"),
    [
        ("plain ascii", "plain ascii", ""),
        ("我爱北京", " ", "我爱 爱北 北京 京"),
        ("東京、京都", " 、 ", "東京 京 京都 都"),  # punctuation ends a run
        ("iphoneを買った", "iphone ", "を買 買っ った た"),
        ("猫", " ", "猫"),
        ("กินข้าว ok", "  ok", "กิ ิน นข ข้ ้า าว ว"),  # Thai marks stay in their bigrams
        ("caf\u00e9 ２０２４年", "café 2024 ", "年"),
        ("서울에서 만나요", "   ", "서울 울에 에서 서 만나 나요 요"),
    ],
)
def test_split_columns(text: str, words: str, grams: str) -> None:
    assert split_columns(normalize(text)) == (words, grams)


def test_run_tokens_end_with_the_last_character() -> None:
    assert run_tokens("天安门") == ["天安", "安门", "门"]
    assert run_tokens("门") == ["门"]


def test_the_tokenizer_keeps_bigrams_and_marks_whole() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(f'CREATE VIRTUAL TABLE t USING fts5(words, grams, tokenize = "{TOKENIZE}")')
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    for text in ["กินข้าว हिन्दी", "東京都 école", "كَتَبَ"]:
        conn.execute("INSERT INTO t VALUES (?, ?)", split_columns(normalize(text)))
    terms = {row[0] for row in conn.execute("SELECT term FROM v")}
    assert {"ข้", "้า", "हिन्दी", "東京", "京都", "都", "ecole", "\u06a9تب"} <= terms
    # The default categories would have cut these at their marks.
    assert "ข" not in terms and "ह" not in terms


# --- the corpus -----------------------------------------------------------------


@pytest.mark.parametrize(("query", "expected"), TOP_HITS, ids=[q for q, _ in TOP_HITS])
async def test_corpus_top_hit(
    store: Store, corpus: dict[str, int], query: str, expected: str
) -> None:
    hits = await search(store, query, agent="a")
    assert hits, f"{query!r} found nothing"
    assert hits[0].message_id == corpus[expected], [h.snippet for h in hits]


@pytest.mark.parametrize("query", NO_HITS)
async def test_corpus_no_hit(store: Store, corpus: dict[str, int], query: str) -> None:
    assert await search(store, query) == []
    # What the query is one step from is found in the same corpus.
    near = {"北冬": "北", "京剧院": "京剧", "ภาษาจีน": "ภาษา", "ecoles": "ecole"}[query]
    assert await search(store, near)


async def test_one_and_two_character_chinese(store: Store) -> None:
    middle = await add(store, "我们去北京吧")
    alone = await add(store, "好 猫")
    end = await add(store, "这是我的猫")
    assert sorted(ids(await search(store, "猫"))) == [alone.id, end.id]
    assert ids(await search(store, "北京")) == [middle.id]
    assert ids(await search(store, "京")) == [middle.id]
    assert ids(await search(store, "京吧")) == [middle.id]
    assert await search(store, "京北") == []


async def test_cjk_phrases_and_mixed_scripts(store: Store) -> None:
    spaced = await add(store, "東京 の 天気 は 晴れ")
    joined = await add(store, "東京の天気は晴れ")
    mixed = await add(store, "新しいiPhoneを買った")
    # Quoted: the runs of the phrase in order, separated as in the query.
    assert ids(await search(store, '"東京 の 天気"')) == [spaced.id]
    assert ids(await search(store, '"東京の天気"')) == [joined.id]
    assert sorted(ids(await search(store, "東京 天気"))) == sorted([spaced.id, joined.id])
    assert ids(await search(store, "iphoneを買った")) == [mixed.id]
    assert ids(await search(store, "IPHONE 買")) == [mixed.id]


# --- ranking ----------------------------------------------------------------------


async def test_phrase_ranks_above_a_bag_of_the_same_words(store: Store) -> None:
    bag = await add(store, "review the budget", at=9)
    phrase = await add(
        store, "The quarterly budget review meeting is on Thursday in the main building", at=1
    )
    # Relevance alone (bm25, ts_rank_cd) prefers the short, newer message
    # (test_bm25_alone_prefers_the_bag)...
    # ...but the one holding the words as written wins, with a higher score.
    hits = await search(store, "budget review")
    assert ids(hits) == [phrase.id, bag.id]
    assert hits[0].score > hits[1].score
    # Without the words in that order, plain bm25 decides.
    assert ids(await search(store, "review budget")) == [bag.id, phrase.id]
    # Only whole-query phrases count; one word alone is no phrase.
    assert ids(await search(store, "budget")) == [bag.id, phrase.id]


async def test_bm25_alone_prefers_the_bag(lite: SqliteStore) -> None:
    bag = await add(lite, "review the budget", at=9)
    phrase = await add(
        lite, "The quarterly budget review meeting is on Thursday in the main building", at=1
    )
    plain = await lite.connection.fetchall(
        f"SELECT rowid % {AGENT_SPAN} FROM messages_fts "
        "WHERE messages_fts MATCH 'budget AND review' ORDER BY bm25(messages_fts)"
    )
    assert [r[0] for r in plain] == [bag.id, phrase.id]


async def test_phrase_bonus_in_cjk(store: Store) -> None:
    apart = await add(store, "天气 北京", at=5)
    together = await add(store, "明天北京天气怎么样，我想知道很多很多事情", at=1)
    assert ids(await search(store, "北京 天气")) == [together.id, apart.id]


async def test_prefix(store: Store) -> None:
    starter = await add(store, "sourdough starter")
    sour = await add(store, "sour cream")
    assert sorted(ids(await search(store, "sour*"))) == sorted([starter.id, sour.id])
    assert ids(await search(store, "sourdo*")) == [starter.id]
    assert ids(await search(store, "sour")) == [sour.id]
    # One letter is too little for a prefix: it is searched as a word.
    assert await search(store, "s*") == []


async def test_a_common_word_is_ranked_in_its_newest_window(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = pg_search if isinstance(store, PostgresStore) else sqlite_search
    monkeypatch.setattr(backend, "RANK_WINDOW", 4)
    best_but_old = await add(store, "common", at=0)
    for i in range(10):
        await add(store, f"common word number {i} in a longer message", at=i + 1)
    hits = await search(store, "common", key=KEY, limit=3)
    assert len(hits) == 3 and best_but_old.id not in ids(hits)
    # A window whose rows are mostly hidden is not allowed to shorten the list.
    for i in range(10):
        await add(store, f"common hidden {i}", key=B1, at=100 + i)
    hits = await search(store, "common", agent="a", limit=8)
    assert len(hits) == 8
    assert ids(await search(store, "common", limit=1)) != []


# --- visibility -----------------------------------------------------------------


async def test_each_scope_sees_exactly_its_sessions(store: Store) -> None:
    for key in (KEY, A2, B1):
        await add(store, f"budget talk in {key}", key=key)
        await add(store, "budget reply", "assistant", key=key)
    expected = {
        SearchScope(session_key=KEY): {KEY},
        SearchScope(session_key=A2): {A2},
        SearchScope(session_key=B1): {B1},
        SearchScope(agent_id="a"): {KEY, A2},
        SearchScope(agent_id="b"): {B1},
        SearchScope(agent_id="nobody"): set(),
        SearchScope(session_key=A2, agent_id="a"): {A2},
        SearchScope(session_key=B1, agent_id="a"): set(),  # not that agent's session
        SearchScope(): {KEY, A2, B1},
    }
    for scope, keys in expected.items():
        hits = await store.search("budget", scope=scope, limit=25, redactor=Redactor())
        assert {h.session_key for h in hits} == keys, scope
        assert len(hits) == 2 * len(keys), scope


@pytest.mark.parametrize(
    "scope", [SearchScope(session_key=KEY), SearchScope(agent_id="a")], ids=["session", "agent"]
)
async def test_hidden_rows_never_take_result_slots(store: Store, scope: SearchScope) -> None:
    # 30 hidden hits that bm25 prefers (short, exact), newer than the visible ones.
    visible = [
        await add(store, f"long visible message number {i} about budget", at=i) for i in range(5)
    ]
    for i in range(15):
        await add(store, "budget", key=B1, at=100 + i)
        gone = await add(store, "budget", at=200 + i)
        await deactivate(store, gone.id)
    hits = await store.search("budget", scope=scope, limit=5, redactor=Redactor())
    assert sorted(ids(hits)) == sorted(r.id for r in visible)


async def explain(store: SqliteStore, sql: str, params: object) -> str:
    rows = await store.connection.run_read(
        lambda conn: conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    )
    return " | ".join(row[3] for row in rows)


async def test_search_plans_start_from_the_index(lite: SqliteStore) -> None:
    # Enough rows that the planner has real statistics to be tempted by.
    for i in range(60):
        await add(lite, f"filler {i} 中文", key=(KEY, A2, B1)[i % 3])
    await lite.connection.fetchall("ANALYZE")
    cases = [
        (SearchScope(agent_id="a"), "北", True),  # one CJK character
        (SearchScope(agent_id="a"), "budget review", True),
        (SearchScope(session_key=KEY), "中", False),
        (SearchScope(), "budget", False),
    ]
    for scope, text, phrase in cases:
        query = build_query(text)
        assert query is not None
        sql = search_plan_sql(scope, phrase=phrase)
        params = {"expr": query.expression, "phrase": query.phrase or query.expression}
        params |= {"window": 5000, "limit": 10, "inner_limit": 20, "session_id": 1, "agent_id": "a"}
        params |= dict(zip(("low", "high"), agent_range(1), strict=True))
        plan = await explain(lite, sql, params)
        # The ranked query starts from the full-text index, with the agent's
        # rowid range handed to FTS5 (idxStr holds M for MATCH, < and > for
        # the rowid bounds)...
        first = next(step for step in plan.split(" | ") if step.startswith("SCAN"))
        assert re.fullmatch(r"SCAN messages_fts VIRTUAL TABLE INDEX \d+:M\d*[<>]{2}.*", first), plan
        # ...and messages and sessions are only ever looked up by primary key,
        # for the winners only: no candidate is checked inside the ranked query.
        assert not re.search(r"SCAN (m|s|messages|sessions)\b", plan), plan
        assert "SEARCH m USING INTEGER PRIMARY KEY" in plan, plan
        inner = plan.split(" | SCAN r")[0]
        assert "SEARCH m USING INTEGER PRIMARY KEY" not in inner, plan


async def test_context_reads_walk_one_session_by_index(lite: SqliteStore) -> None:
    sql = transcript_sql(SQLITE)
    for statement in (sql.context_from, sql.context_before):
        plan = await explain(lite, statement, (KEY, 5, 5))
        assert "SEARCH m USING INDEX messages_session (session_id=? AND id" in plan, plan
        assert "SCAN" not in plan and "TEMP B-TREE" not in plan, plan


async def test_each_agent_has_its_own_rowid_range(lite: SqliteStore) -> None:
    a = await add(lite, "shared word")
    b = await add(lite, "shared word", key=B1)
    slots = dict(await lite.connection.fetchall("SELECT agent_id, slot FROM agents"))
    assert set(slots) == {"a", "b"} and slots["a"] != slots["b"]
    for record, agent in ((a, "a"), (b, "b")):
        rows = await lite.connection.fetchall(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?",
            (session_filter(record.session_id),),
        )
        low, high = agent_range(slots[agent])
        assert [r[0] for r in rows] == [low + record.id] and low + record.id < high


async def test_each_agent_sees_its_own_rows(store: Store) -> None:
    a = await add(store, "shared word")
    b = await add(store, "shared word", key=B1)
    # Each agent's search sees its own row only; the admin's sees both.
    assert ids(await search(store, "shared", agent="a")) == [a.id]
    assert ids(await search(store, "shared", agent="b")) == [b.id]
    hits = await store.search("shared", scope=SearchScope(), limit=10, redactor=Redactor())
    assert sorted(ids(hits)) == sorted([a.id, b.id])


async def test_the_admin_search_ranks_across_agents(store: Store) -> None:
    # One ranked query per agent, merged: phrase matches first, then bm25,
    # then the newest, and `limit` counts across agents.
    long_a = await add(store, "a long message that mentions the budget once, in passing", at=1)
    short_b = await add(store, "budget", key=B1, at=2)
    bag_b = await add(store, "review of the budget", key=B1, at=3)
    phrase_a = await add(store, "the budget review", at=4)
    admin = SearchScope()
    hits = await store.search("budget review", scope=admin, limit=10, redactor=Redactor())
    assert ids(hits) == [phrase_a.id, bag_b.id]
    hits = await store.search("budget", scope=admin, limit=2, redactor=Redactor())
    assert ids(hits) == [short_b.id, phrase_a.id]
    hits = await store.search("budget", scope=admin, limit=10, redactor=Redactor())
    assert ids(hits)[-1] == long_a.id and len(hits) == 4
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_an_agent_without_sessions_sees_nothing(store: Store) -> None:
    shared = await add(store, "shared word")
    assert await search(store, "shared", agent="nobody") == []
    assert ids(await search(store, "shared", agent="a")) == [shared.id]  # its own agent sees it


async def test_the_window_is_one_walk_of_the_index_range(lite: SqliteStore) -> None:
    query = build_query("猫")
    assert query is not None
    expression = f"({query.expression}) AND {session_filter(1)}"
    params = {"expr": expression, "window": 5000}
    params |= dict(zip(("low", "high"), agent_range(1), strict=True))
    plan = await explain(lite, sqlite_search.WINDOW_SQL, params)
    # One walk of the index in rowid order, stopped by the LIMIT: no sort,
    # and no other table.
    assert re.fullmatch(r"SCAN messages_fts VIRTUAL TABLE INDEX \d+:M\d*[<>]{2}.*", plan), plan


# --- redaction --------------------------------------------------------------------

KEY_BODY = "abcDEF1234567890ghijKLMNOP"
SECRETS = [
    f"sk-proj-{KEY_BODY}",
    "Bearer eyJhbGciOiJIUzI1NiJ9x.payload123Token",
    "4111 1111 1111 1111",
]


@pytest.mark.parametrize("filler", [0, 240, 280], ids=["start", "near-cut", "past-cut"])
async def test_snippets_are_redacted_whole(store: Store, filler: int) -> None:
    text = (
        "word " * (filler // 5)
        + f"deploy with {SECRETS[0]} and header Authorization: {SECRETS[1]} "
        + f"then pay with {SECRETS[2]} tomorrow"
    )
    record = await add(store, text)
    for query in ["deploy", "tomorrow", "header", "pay"]:
        hits = await search(store, query, key=KEY)
        assert ids(hits) == [record.id], query
        snippet = hits[0].snippet
        assert len(snippet) <= 300
        for secret in SECRETS:
            for piece in (secret[i : i + 8] for i in range(len(secret) - 7)):
                if piece.strip() and not piece.startswith(("sk-proj", "Bearer")):
                    assert piece not in snippet, (query, piece, snippet)


async def test_a_found_secret_is_still_masked(store: Store) -> None:
    record = await add(store, f"my key is sk-proj-{KEY_BODY}")
    hits = await search(store, "abcdef1234567890ghijklmnop", key=KEY)
    # Searching for the secret itself may find the message, never show it.
    assert ids(hits) in ([], [record.id])
    assert all(KEY_BODY not in h.snippet for h in hits)


def test_msg_helper_builds_messages_for_the_default_session() -> None:
    assert msg("x").session_key == KEY and msg("x").ts == T0
