"""Behaviour every Store backend must have, plus SQLite-specific checks.

Contract tests take the `store` fixture, parametrised over backends, so a
PostgreSQL backend only has to add itself to BACKENDS.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.store.sqlite as sqlite_backend
from core.store import (
    DuplicateMessage,
    MessageRecord,
    MigrationError,
    NewMessage,
    SqliteStore,
    Store,
    UnknownSession,
    open_store,
)
from core.store.migrations import Migration, load_migrations, split_sql

BACKENDS = ["sqlite"]
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KEY = "agent:a:telegram:private:100"
OTHER = "agent:a:telegram:private:200"


def make_store(backend: str, directory: Path) -> Store:
    if backend == "sqlite":
        return SqliteStore(directory / "kept.sqlite")
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    async with make_store(backend, tmp_path) as opened:
        await add_session(opened, KEY)
        await add_session(opened, OTHER)
        yield opened


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "kept.sqlite") as opened:
        await add_session(opened, KEY)
        yield opened


async def add_session(store: Store, key: str, now: datetime = T0) -> None:
    chat_id = key.rsplit(":", 1)[1]
    await store.ensure_session(
        key,
        agent_id="a",
        platform="telegram",
        chat_id=chat_id,
        chat_kind="private",
        thread_id=None,
        now=now,
    )


def msg(
    text: str, role: str = "user", *, at: float = 0, key: str = KEY, **kw: object
) -> NewMessage:
    return NewMessage(key, role, text, T0 + timedelta(seconds=at), **kw)  # type: ignore[arg-type]


async def add(store: Store, text: str, role: str = "user", **kw: object) -> MessageRecord:
    return await store.add_message(msg(text, role, **kw))  # type: ignore[arg-type]


async def deactivate(store: Store, message_id: int) -> None:
    # No Store method hides a message yet; reach into the backend directly.
    assert isinstance(store, SqliteStore)
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE messages SET active = 0 WHERE id = ?", (message_id,))


def ids(records: list[MessageRecord]) -> list[int]:
    return [r.id for r in records]


# --- sessions -------------------------------------------------------------


async def test_ensure_session_is_an_upsert_that_bumps_updated_at(store: Store) -> None:
    first = await store.get_session(KEY)
    assert first is not None and first.created_at == first.updated_at == T0
    later = T0 + timedelta(hours=1)
    again = await store.ensure_session(
        KEY, agent_id="a", platform="telegram", chat_id="100", chat_kind="private",
        thread_id=None, now=later,
    )  # fmt: skip
    assert (again.id, again.created_at, again.updated_at) == (first.id, T0, later)
    assert await store.get_session("agent:a:telegram:private:nope") is None


async def test_add_message_round_trips_and_bumps_session(store: Store) -> None:
    stored = await add(store, "hi", at=90, sender_id="u1", platform_message_id="7", payload=None)
    assert await store.get_message(stored.id) == stored
    assert stored.ts == T0 + timedelta(seconds=90) and stored.ts.tzinfo is not None
    assert stored.active and stored.session_key == KEY
    session = await store.get_session(KEY)
    assert session is not None and session.updated_at == stored.ts
    assert await store.get_message(stored.id + 1000) is None


async def test_times_are_stored_as_utc_instants(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    stored = await store.add_message(
        NewMessage(KEY, "user", "x", datetime(2025, 1, 1, 14, tzinfo=plus_two))
    )
    fetched = await store.get_message(stored.id)
    assert fetched is not None and fetched.ts == datetime(2025, 1, 1, 12, tzinfo=UTC)
    with pytest.raises(ValueError, match="naive"):
        await store.add_message(NewMessage(KEY, "user", "x", datetime(2025, 1, 1)))


async def test_add_message_needs_an_existing_session(store: Store) -> None:
    with pytest.raises(UnknownSession):
        await add(store, "hi", key="agent:a:telegram:private:999")
    with pytest.raises(LookupError):
        await add(store, "hi", role="assistant", in_reply_to=424242)


# --- full-text rows ---------------------------------------------------------


async def test_only_user_and_assistant_text_is_indexed(store: Store) -> None:
    user = await add(store, "needle in user text")
    await add(store, "needle in reply", role="assistant", in_reply_to=user.id)
    for role, kind in [
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "reasoning"),
        ("user", "image"), ("assistant", "error"), ("system", "text"),
    ]:  # fmt: skip
        await add(store, f"needle {kind}", role, kind=kind, in_reply_to=user.id)
    assert await store.count_index_rows(KEY) == 2
    assert await store.count_index_rows() == 2
    assert await store.count_index_rows(OTHER) == 0
    assert len(await store.search_text("needle", session_key=None, limit=50)) == 2


async def test_message_and_index_row_commit_together(
    sqlite_store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_args: object) -> None:
        raise RuntimeError("index write failed")

    monkeypatch.setattr(sqlite_store, "_insert_index_row", explode)
    with pytest.raises(RuntimeError, match="index write failed"):
        await add(sqlite_store, "lost message")
    # Same, but failing inside SQLite itself rather than in Python.
    monkeypatch.undo()
    monkeypatch.setattr(sqlite_backend, "_FTS_INSERT", "INSERT INTO no_such_fts VALUES (?, ?)")
    with pytest.raises(sqlite3.OperationalError):
        await add(sqlite_store, "lost message")
    monkeypatch.undo()

    assert (await sqlite_store.fetchall("SELECT count(*) FROM messages"))[0][0] == 0
    assert await sqlite_store.count_index_rows() == 0
    # The connection is not left inside a transaction.
    kept = await add(sqlite_store, "kept message")
    assert ids(await sqlite_store.search_text("message", session_key=KEY, limit=5)) == [kept.id]


async def test_deleting_a_session_removes_its_index_rows(sqlite_store: SqliteStore) -> None:
    await add(sqlite_store, "bye")
    with sqlite3.connect(sqlite_store.path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM sessions")
    assert await sqlite_store.count_index_rows() == 0


# --- duplicates -------------------------------------------------------------


async def test_duplicate_user_platform_message_is_stored_once(store: Store) -> None:
    first = await add(store, "hello", platform_message_id="42")
    with pytest.raises(DuplicateMessage):
        await add(store, "hello", platform_message_id="42")
    assert ids(await store.search_text("hello", session_key=None, limit=10)) == [first.id]
    # Another chat, an assistant row, or no platform id at all: not duplicates.
    await add(store, "hello", key=OTHER, platform_message_id="42")
    await add(store, "hi", role="assistant", platform_message_id="42", in_reply_to=first.id)
    await add(store, "hi", role="assistant", platform_message_id="42", in_reply_to=first.id)
    await add(store, "no id")
    await add(store, "no id")


async def test_set_platform_message_id(store: Store) -> None:
    user = await add(store, "q")
    reply = await add(store, "a", role="assistant", in_reply_to=user.id)
    await store.set_platform_message_id(reply.id, "900")
    fetched = await store.get_message(reply.id)
    assert fetched is not None and fetched.platform_message_id == "900"
    with pytest.raises(LookupError):
        await store.set_platform_message_id(reply.id + 1000, "901")


# --- history and unanswered -------------------------------------------------


async def test_history_orders_replies_after_the_message_they_answer(store: Store) -> None:
    u1 = await add(store, "u1", at=1)
    u2 = await add(store, "u2", at=2)  # queued while u1 was being answered
    call = await add(store, "{}", "assistant", kind="tool_call", in_reply_to=u1.id, at=3)
    result = await add(store, "{}", "tool", kind="tool_result", in_reply_to=u1.id, at=4)
    a1 = await add(store, "a1", "assistant", in_reply_to=u1.id, at=5)
    a2 = await add(store, "a2", "assistant", in_reply_to=u2.id, at=6)
    await add(store, "elsewhere", key=OTHER)
    u3 = await add(store, "u3", at=7)

    before_u2 = await store.history(KEY, before_turn_of=u2.id, limit=50)
    assert ids(before_u2) == [u1.id, call.id, result.id, a1.id]
    before_u3 = await store.history(KEY, before_turn_of=u3.id, limit=50)
    assert ids(before_u3) == [u1.id, call.id, result.id, a1.id, u2.id, a2.id]
    assert ids(await store.history(KEY, before_turn_of=u3.id, limit=3)) == [a1.id, u2.id, a2.id]
    assert await store.history(KEY, before_turn_of=u1.id, limit=50) == []
    assert await store.history(KEY, before_turn_of=u3.id, limit=0) == []
    assert await store.history("agent:a:x:private:1", before_turn_of=u3.id, limit=5) == []


async def test_history_skips_inactive_messages(store: Store) -> None:
    u1 = await add(store, "u1")
    a1 = await add(store, "a1", "assistant", in_reply_to=u1.id)
    u2 = await add(store, "u2")
    await deactivate(store, a1.id)
    assert ids(await store.history(KEY, before_turn_of=u2.id, limit=10)) == [u1.id]


async def test_history_uses_the_turn_index(sqlite_store: SqliteStore) -> None:
    rows = await sqlite_store.fetchall(
        "EXPLAIN QUERY PLAN " + sqlite_backend._HISTORY, (KEY, 10, 5)
    )
    plan = " | ".join(r[3] for r in rows)
    assert "INDEX messages_session_turn" in plan, plan
    assert "SCAN" not in plan and "TEMP B-TREE" not in plan, plan


async def test_unanswered(store: Store) -> None:
    await add(store, "too old", at=-60)
    answered = await add(store, "answered", at=1)
    await add(store, "reply", "assistant", in_reply_to=answered.id, at=2)
    pending = await add(store, "pending", at=5)
    earlier = await add(store, "stored later, sent earlier", key=OTHER, at=3)
    await add(store, "photo", kind="image", at=4)
    tool_only = await add(store, "tool only", at=6)
    await add(store, "{}", "assistant", kind="tool_call", in_reply_to=tool_only.id, at=7)
    hidden = await add(store, "hidden", at=8)
    await deactivate(store, hidden.id)

    found = await store.unanswered(since=T0)
    # A turn that crashed between tool rounds never sent its answer.
    assert ids(found) == [earlier.id, pending.id, tool_only.id]
    assert found[0].session_key == OTHER


# --- search -----------------------------------------------------------------


async def test_search_text_matches_every_word(store: Store) -> None:
    both = await add(store, "The quick brown fox", at=1)
    await add(store, "a quick reply", at=2)
    other = await add(store, "quick brown dog", key=OTHER, at=3)
    assert ids(await store.search_text("brown QUICK", session_key=KEY, limit=5)) == [both.id]
    found = await store.search_text("quick brown", session_key=None, limit=5)
    assert sorted(ids(found)) == sorted([both.id, other.id])
    assert len(await store.search_text("quick", session_key=None, limit=2)) == 2
    assert await store.search_text("quick", session_key=None, limit=0) == []


async def test_search_text_ranks_equal_matches_newest_first(store: Store) -> None:
    old = await add(store, "same words", at=1)
    new = await add(store, "same words", at=2)
    assert ids(await store.search_text("same", session_key=KEY, limit=5)) == [new.id, old.id]


async def test_search_text_skips_inactive(store: Store) -> None:
    gone = await add(store, "secret")
    await deactivate(store, gone.id)
    assert await store.search_text("secret", session_key=None, limit=5) == []


@pytest.mark.parametrize(
    ("stored", "queries"),
    [
        ("Une école primaire", ["ecole", "ÉCOLE", "école"]),
        ("İstanbul trip", ["istanbul", "ISTANBUL", "ıstanbul", "İSTANBUL"]),
        ("ISTANBUL trip", ["İstanbul", "ıstanbul"]),
        ("ıstanbul trip", ["Istanbul"]),
        ("من می\u200cخواهم بروم", ["میخواهم", "می\u200cخواهم"]),
        ("من میخواهم بروم", ["می\u200cخواهم"]),
        ("كَتَبَ الوَلَدُ", ["كتب", "الولد", "كـتـب"]),
        ("ｆｕｌｌｗｉｄｔｈ ﬁne", ["fullwidth", "fine"]),
        ("zero\u200bwidth", ["zerowidth"]),
        ("Straße", ["STRASSE", "strasse"]),
    ],
)
async def test_search_text_normalises_both_sides(
    store: Store, stored: str, queries: list[str]
) -> None:
    record = await add(store, stored)
    for query in queries:
        assert ids(await store.search_text(query, session_key=KEY, limit=5)) == [record.id], query


async def test_search_text_treats_operators_as_words(store: Store) -> None:
    record = await add(store, "near and or not body star")
    for query in ["NEAR(", "AND", "OR not", "body:", "star*", '"near"', "(and)", "-or", "^near"]:
        assert ids(await store.search_text(query, session_key=None, limit=5)) == [record.id], query
    for query in ["", "   ", "!!!", "😀", '"', "*", "()", "\x00", "\ud800"]:
        assert await store.search_text(query, session_key=None, limit=5) == [], query


HOSTILE_BITS = [
    '"', "'", "(", ")", "*", "-", "+", ":", "^", "{", "}", "[", "]", ",", ";", "\\", "%",
    "NEAR(", "NEAR/2", "AND", "OR", "NOT", "body:", "body :", "rank:", "messages_fts",
    "\x00", "\n", "\t", "\x1b", "\u200c", "\ufeff", "😀", "👍🏽", "İ", "ı", "é", "\ud800",
    "word", "near", "body", "x",
]  # fmt: skip
hostile_text = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.one_of(st.sampled_from(HOSTILE_BITS), st.text(max_size=3), st.just(" ")), max_size=25
    ).map("".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=hostile_text)
def test_match_expression_is_always_valid_fts5(query: str) -> None:
    expression = sqlite_backend.match_expression(query)
    if expression is None:
        return
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')"
    )
    conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_search_text_never_raises(backend: str, tmp_path: Path) -> None:
    # Hypothesis cannot drive an async test, so this one owns its event loop.
    loop = asyncio.new_event_loop()
    store = make_store(backend, tmp_path)
    try:
        loop.run_until_complete(store.open())
        loop.run_until_complete(add_session(store, KEY))
        loop.run_until_complete(store.add_message(msg("near word body x and or not")))

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(query=hostile_text, scoped=st.booleans())
        def check(query: str, scoped: bool) -> None:
            found = loop.run_until_complete(
                store.search_text(query, session_key=KEY if scoped else None, limit=5)
            )
            assert isinstance(found, list)

        check()
    finally:
        loop.run_until_complete(store.close())
        loop.close()


# --- concurrency ------------------------------------------------------------


async def test_concurrent_add_message(store: Store) -> None:
    async def turn(i: int) -> tuple[MessageRecord, MessageRecord]:
        user = await add(store, f"question {i} concurrency", at=i, platform_message_id=str(i))
        await store.search_text("concurrency", session_key=KEY, limit=3)
        reply = await add(store, f"answer {i}", "assistant", in_reply_to=user.id, at=i)
        return user, reply

    turns = await asyncio.gather(*(turn(i) for i in range(50)))
    stored = [r for pair in turns for r in pair]
    assert len({r.id for r in stored}) == 100
    assert await store.count_index_rows(KEY) == 100
    assert len(await store.search_text("concurrency", session_key=KEY, limit=100)) == 50
    assert await store.unanswered(since=T0) == []
    last = max(ids(stored)) + 1
    assert len(await store.history(KEY, before_turn_of=last, limit=1000)) == 100


async def test_cancelled_writer_leaves_store_consistent(store: Store) -> None:
    task = asyncio.create_task(add(store, "maybe stored"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await add(store, "stored afterwards")
    everything = await store.search_text("stored", session_key=KEY, limit=10)
    assert len(everything) == await store.count_index_rows(KEY)


# --- SQLite specifics: schema, migrations, PRAGMAs, URLs ---------------------


async def test_pragmas_in_force(sqlite_store: SqliteStore) -> None:
    async def pragma(name: str) -> object:
        return (await sqlite_store.fetchall(f"PRAGMA {name}"))[0][0]

    assert await pragma("journal_mode") == "wal"
    assert await pragma("foreign_keys") == 1
    assert await pragma("busy_timeout") == 5000
    assert await pragma("synchronous") == 1  # NORMAL


async def test_migrations_apply_once(tmp_path: Path) -> None:
    path = tmp_path / "new" / "kept.sqlite"
    path.parent.mkdir()
    latest = len(load_migrations())
    async with SqliteStore(path) as store:
        assert await store.schema_version() == latest
        await add_session(store, KEY)
    async with SqliteStore(path) as store:
        assert await store.schema_version() == latest
        rows = await store.fetchall("SELECT version, name FROM schema_version ORDER BY version")
        assert [r[0] for r in rows] == list(range(1, latest + 1))
        assert tuple(rows[0]) == (1, "initial")
        assert await store.get_session(KEY) is not None


async def test_failing_migration_rolls_back_and_names_its_number(tmp_path: Path) -> None:
    path = tmp_path / "kept.sqlite"
    broken = Migration(
        2, "broken", sql="CREATE TABLE extra (x INTEGER);\nINSERT INTO nope VALUES (1);"
    )
    with pytest.raises(MigrationError, match="0002") as info:
        await SqliteStore(path, migrations=[*load_migrations(), broken]).open()
    assert info.value.version == 2
    async with SqliteStore(path) as store:
        assert await store.schema_version() == 1
        tables = await store.fetchall("SELECT name FROM sqlite_master WHERE name = 'extra'")
        assert tables == []


async def test_python_migrations_and_sequence_checks(tmp_path: Path) -> None:
    path = tmp_path / "kept.sqlite"

    async def upgrade(db: object) -> None:
        await db.execute("CREATE TABLE extra (x INTEGER)")  # type: ignore[attr-defined]

    migrations = [*load_migrations(), Migration(2, "extra", upgrade=upgrade)]
    async with SqliteStore(path, migrations=migrations) as store:
        assert await store.schema_version() == 2
    with pytest.raises(MigrationError, match="newer"):
        await SqliteStore(path).open()
    with pytest.raises(MigrationError, match="expected 0002"):
        await SqliteStore(path, migrations=[migrations[0], Migration(3, "gap", sql="")]).open()


def test_split_sql_respects_literals_comments_and_triggers() -> None:
    script = """
    -- a comment; with a semicolon
    CREATE TABLE t (x TEXT DEFAULT 'a;b'); /* block; comment */
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN
        UPDATE t SET x = 'c;d'; DELETE FROM t WHERE x = ';';
    END;
    INSERT INTO t VALUES ('e') -- no trailing semicolon
    """
    statements = split_sql(script)
    assert len(statements) == 3
    assert "CREATE TRIGGER" in statements[1] and statements[1].endswith("END;")
    conn = sqlite3.connect(":memory:")
    for statement in statements:
        conn.execute(statement)
    assert conn.execute("SELECT x FROM t").fetchall() == [("c;d",)]


async def test_open_store_urls(tmp_path: Path) -> None:
    relative = open_store("sqlite:///data/sub/kept.sqlite", base_dir=tmp_path)
    assert isinstance(relative, SqliteStore)
    assert Path(relative.path) == tmp_path / "data" / "sub" / "kept.sqlite"
    assert (tmp_path / "data" / "sub").is_dir()
    absolute = open_store(f"sqlite:///{tmp_path}/abs/kept.sqlite")
    assert isinstance(absolute, SqliteStore) and Path(absolute.path).is_absolute()
    assert (tmp_path / "abs").is_dir()
    async with open_store("sqlite:///:memory:") as memory:
        await add_session(memory, KEY)
        assert (await add(memory, "in memory")).id == 1
    for bad in ["postgresql://localhost/kept", "sqlite://kept.sqlite", "sqlite:///", "kept.sqlite"]:
        with pytest.raises(ValueError, match="sqlite:///"):
            open_store(bad, base_dir=tmp_path)
    with pytest.raises(ValueError, match=r"\?"):
        open_store("sqlite:///kept.sqlite?mode=ro", base_dir=tmp_path)
