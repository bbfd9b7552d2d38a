"""Behaviour every Store backend must have.

Contract tests take the `store` fixture, parametrised over the backends
(SQLite and PostgreSQL, see `storage_url` in tests/support/postgres.py).
Backend-only checks (schema, migrations, PRAGMAs, query plans) are in
tests/core/store/sqlite/ and tests/core/store/postgres/; the search index in
depth in tests/core/search/.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.search.redact import Redactor
from core.store import (
    DuplicateMessage,
    MessageRecord,
    NewMessage,
    SearchHit,
    SearchScope,
    Store,
    UnknownSession,
)
from tests.support.store_helpers import (
    count_index_rows,
    index_consistency,
    open_any_store,
)
from tests.support.store_helpers import deactivate as deactivate

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KEY = "agent:a:telegram:private:100"
OTHER = "agent:a:telegram:private:200"


@pytest.fixture
async def store(storage_url: str) -> AsyncIterator[Store]:
    async with open_any_store(storage_url) as opened:
        await add_session(opened, KEY)
        await add_session(opened, OTHER)
        yield opened


async def add_session(store: Store, key: str, now: datetime = T0) -> None:
    """Create the session `key` names (agent:<agent>:<platform>:<kind>:<chat>)."""
    parts = key.split(":")
    await store.ensure_session(
        key,
        agent_id=parts[1],
        platform=parts[2],
        chat_id=parts[4],
        chat_kind=parts[3],  # type: ignore[arg-type]
        thread_id=parts[6] if len(parts) > 6 else None,
        now=now,
    )


def msg(
    text: str, role: str = "user", *, at: float = 0, key: str = KEY, **kw: object
) -> NewMessage:
    return NewMessage(key, role, text, T0 + timedelta(seconds=at), **kw)  # type: ignore[arg-type]


async def add(store: Store, text: str, role: str = "user", **kw: object) -> MessageRecord:
    return await store.add_message(msg(text, role, **kw))  # type: ignore[arg-type]


def ids(records: Sequence[MessageRecord | SearchHit]) -> list[int]:
    return [r.id if isinstance(r, MessageRecord) else r.message_id for r in records]


REDACTOR = Redactor()


async def search(
    store: Store, query: str, *, key: str | None = None, agent: str | None = None, limit: int = 10
) -> list[SearchHit]:
    scope = SearchScope(session_key=key, agent_id=agent)
    return await store.search(query, scope=scope, limit=limit, redactor=REDACTOR)


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
    assert await count_index_rows(store, KEY) == 2
    assert await count_index_rows(store) == 2
    assert await count_index_rows(store, OTHER) == 0
    assert len(await search(store, "needle", limit=50)) == 2


# --- duplicates -------------------------------------------------------------


async def test_duplicate_user_platform_message_is_stored_once(store: Store) -> None:
    first = await add(store, "hello", platform_message_id="42")
    with pytest.raises(DuplicateMessage):
        await add(store, "hello", platform_message_id="42")
    assert ids(await search(store, "hello")) == [first.id]
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


async def test_sessions_with_last_platform_id(store: Store) -> None:
    quiet = "agent:a:telegram:group:300"
    await add_session(store, quiet)
    await add_session(store, "agent:a:discord:private:400")
    # Ids compare as numbers ("999" < "1000"); the bot's own messages and
    # messages without a platform id do not count.
    await add(store, "x", platform_message_id="999")
    await add(store, "x", platform_message_id="1000")
    first = await add(store, "x", key=OTHER, platform_message_id="12")
    await add(store, "x", "assistant", platform_message_id="5000", in_reply_to=first.id)
    await add(store, "imported")
    found = await store.sessions_with_last_platform_id("telegram")
    assert [(s.key, last) for s, last in found] == [(KEY, "1000"), (OTHER, "12"), (quiet, None)]
    assert await store.sessions_with_last_platform_id("matrix") == []


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


async def test_unanswered_up_to_is_the_message_and_what_its_session_owes(store: Store) -> None:
    await add(store, "too old", at=-60)
    answered = await add(store, "answered", at=1)
    await add(store, "reply", "assistant", in_reply_to=answered.id, at=2)
    owed = await add(store, "owed", at=3)
    await add(store, "other chat", key=OTHER, at=4)
    tool_only = await add(store, "tool only", at=5)
    await add(store, "{}", "assistant", kind="tool_call", in_reply_to=tool_only.id, at=6)
    hidden = await add(store, "hidden", at=7)
    await deactivate(store, hidden.id)
    mine = await add(store, "mine", at=8)
    await add(store, "after mine", at=9)

    found = await store.unanswered_up_to(mine, since=T0)
    assert ids(found) == [owed.id, tool_only.id, mine.id]
    # The message itself counts whatever its age; an answered one does not.
    old = await add(store, "sent long ago, stored now", at=-3600)
    assert ids(await store.unanswered_up_to(old, since=T0 + timedelta(hours=1))) == [old.id]
    assert ids(await store.unanswered_up_to(answered, since=T0)) == []


# --- search and lifecycle ------------------------------------------------------


async def test_search_matches_every_word_within_the_scope(store: Store) -> None:
    both = await add(store, "The quick brown fox", at=1)
    await add(store, "a quick reply", at=2)
    other = await add(store, "quick brown dog", key=OTHER, at=3)
    assert ids(await search(store, "brown QUICK", key=KEY)) == [both.id]
    assert sorted(ids(await search(store, "quick brown"))) == sorted([both.id, other.id])
    assert sorted(ids(await search(store, "quick brown", agent="a"))) == [both.id, other.id]
    assert await search(store, "quick brown", agent="b") == []
    assert len(await search(store, "quick", limit=2)) == 2
    assert await search(store, "quick", limit=0) == []
    assert await search(store, "quick", key="agent:a:telegram:private:404") == []


async def test_search_hit_fields(store: Store) -> None:
    record = await add(store, "Une école à Paris", at=5)
    [hit] = await search(store, "ecole", key=KEY)
    assert (hit.message_id, hit.session_key, hit.role, hit.ts) == (
        record.id, KEY, "user", T0 + timedelta(seconds=5),
    )  # fmt: skip
    assert hit.snippet == "Une école à Paris" and hit.score > 0


async def test_search_ranks_equal_matches_newest_first(store: Store) -> None:
    old = await add(store, "same words", at=1)
    new = await add(store, "same words", at=2)
    # Recency is the message's time, not its insertion order.
    older_but_later = await add(store, "same words", at=0)
    assert ids(await search(store, "same", key=KEY)) == [new.id, old.id, older_but_later.id]


async def test_search_skips_inactive(store: Store) -> None:
    gone = await add(store, "secret")
    await deactivate(store, gone.id)
    assert await search(store, "secret") == []
    # Hiding took the index row along, not only the search's final check.
    assert await count_index_rows(store) == 0
    assert await index_consistency(store) == (0, 0)


@pytest.mark.parametrize(
    ("stored", "queries"),
    [
        ("Une école primaire", ["ecole", "ÉCOLE", "école"]),
        ("İstanbul trip", ["istanbul", "ISTANBUL", "ıstanbul", "İSTANBUL"]),
        ("ISTANBUL trip", ["İstanbul", "ıstanbul"]),
        ("ıstanbul trip", ["Istanbul"]),
        ("من می\u200cخواهم بروم", ["میخواهم", "می\u200cخواهم"]),
        ("من میخواهم بروم", ["می\u200cخواهم"]),
        ("كَتَبَ الوَلَدُ", ["كتب", "الولد", "كـتـب", "کتب"]),
        ("ｆｕｌｌｗｉｄｔｈ ﬁne", ["fullwidth", "fine"]),
        ("zero\u200bwidth", ["zerowidth"]),
        ("Straße", ["STRASSE", "strasse"]),
    ],
)
async def test_search_normalises_both_sides(store: Store, stored: str, queries: list[str]) -> None:
    record = await add(store, stored)
    for query in queries:
        assert ids(await search(store, query, key=KEY)) == [record.id], query


async def test_search_treats_operators_as_words(store: Store) -> None:
    record = await add(store, "near and or not body star words grams session")
    queries = ["NEAR(", "AND", "OR not", "body:", "star*", '"near"', "(and)", "-or", "^near"]
    queries += ["grams:session", "{words}: star", "session: body", "NEAR( near body )", "body*star"]
    for query in queries:
        assert ids(await search(store, query)) == [record.id], query
    for query in ["", "   ", "!!!", "😀", '"', "*", "()", "\x00", "\ud800", '""', "s1"]:
        assert await search(store, query) == [], query


async def test_edit_and_delete_keep_search_in_step(store: Store) -> None:
    await add(store, "first draft", platform_message_id="9")
    edited = await store.edit_message(
        platform="telegram", chat_id="100", platform_message_id="9", text="final version"
    )
    assert edited is not None and edited.text == "final version"
    assert await search(store, "draft") == []
    assert ids(await search(store, "final")) == [edited.id]
    assert await store.delete_message(platform="telegram", chat_id="100", platform_message_id="9")
    assert await search(store, "final") == []
    assert await store.get_message(edited.id) is None
    assert not await store.delete_message(
        platform="telegram", chat_id="100", platform_message_id="9"
    )
    missing = await store.edit_message(
        platform="telegram", chat_id="100", platform_message_id="9", text="x"
    )
    assert missing is None
    assert await index_consistency(store) == (0, 0)


async def test_delete_session_removes_everything(store: Store) -> None:
    user = await add(store, "doomed words")
    await add(store, "{}", "tool", kind="tool_result", in_reply_to=user.id)
    kept = await add(store, "doomed words", key=OTHER)
    assert await store.delete_session(KEY) == 2
    assert await store.get_session(KEY) is None
    assert ids(await search(store, "doomed")) == [kept.id]
    assert await store.delete_session(KEY) == 0
    assert await index_consistency(store) == (0, 0)
    # The key can be used again, as a new, empty session.
    await add_session(store, KEY)
    assert (await add(store, "reborn")).session_key == KEY
    assert ids(await search(store, "doomed", key=KEY)) == []


async def test_messages_around(store: Store) -> None:
    rows = [await add(store, f"m{i}", "user" if i % 2 else "assistant", at=i) for i in range(9)]
    await add(store, "{}", "tool", kind="tool_result", at=20)
    await add(store, "elsewhere", key=OTHER)
    middle = rows[4].id
    around = await store.messages_around(KEY, around_message_id=middle, limit=3)
    assert ids(around) == [rows[3].id, rows[4].id, rows[5].id]
    assert ids(await store.messages_around(KEY, around_message_id=rows[0].id, limit=3)) == ids(
        rows[:3]
    )
    assert ids(await store.messages_around(KEY, around_message_id=rows[8].id, limit=4)) == ids(
        rows[5:]
    )
    # Latest, skipping the tool row; oldest first.
    assert ids(await store.messages_around(KEY, around_message_id=None, limit=2)) == ids(rows[7:])
    # A message of another session (or none at all) is not an anchor here.
    elsewhere = (await search(store, "elsewhere"))[0].message_id
    assert await store.messages_around(KEY, around_message_id=elsewhere, limit=5) == []
    assert await store.messages_around(KEY, around_message_id=10_000, limit=5) == []
    assert await store.messages_around("agent:a:x:private:1", around_message_id=None, limit=5) == []
    assert await store.messages_around(KEY, around_message_id=None, limit=0) == []


HOSTILE_BITS = [
    '"', "'", "(", ")", "*", "-", "+", ":", "^", "{", "}", "[", "]", ",", ";", "\\", "%",
    "NEAR(", "NEAR/2", "AND", "OR", "NOT", "words:", "grams :", "{session}:", "rank:",
    "messages_fts", "\x00", "\n", "\t", "\x1b", "\u200c", "\ufeff", "😀", "👍🏽", "İ", "ı",
    "é", "\ud800", "\u0301", "word", "near", "body", "x", "東", "京都", "ภา", "ษ", "ั",
]  # fmt: skip
hostile_text = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.one_of(st.sampled_from(HOSTILE_BITS), st.text(max_size=3), st.just(" ")), max_size=25
    ).map("".join),
)


def test_search_never_raises(storage_url: str) -> None:
    # Hypothesis cannot drive an async test, so this one owns its event loop.
    loop = asyncio.new_event_loop()
    store = open_any_store(storage_url)
    try:
        loop.run_until_complete(store.open())
        loop.run_until_complete(add_session(store, KEY))
        loop.run_until_complete(store.add_message(msg("near word body x and or not 東京都 ภาษา")))

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(query=hostile_text, scope=st.sampled_from([KEY, "a", None]))
        def check(query: str, scope: str | None) -> None:
            key = scope if scope == KEY else None
            agent = scope if scope == "a" else None
            found = loop.run_until_complete(search(store, query, key=key, agent=agent))
            assert isinstance(found, list)

        check()
        # And a 4 KB paste of everything at once.
        huge = "".join(HOSTILE_BITS) * 40
        assert isinstance(loop.run_until_complete(search(store, huge[:4096])), list)
        # The same store finds what it holds: the searches above were searches.
        found = loop.run_until_complete(search(store, "near word", key=KEY))
        assert [hit.snippet for hit in found] == ["near word body x and or not 東京都 ภาษา"]
    finally:
        loop.run_until_complete(store.close())
        loop.close()


# --- concurrency ------------------------------------------------------------


async def test_concurrent_add_message(store: Store) -> None:
    async def turn(i: int) -> tuple[MessageRecord, MessageRecord]:
        user = await add(store, f"question {i} concurrency", at=i, platform_message_id=str(i))
        await search(store, "concurrency", key=KEY, limit=3)
        reply = await add(store, f"answer {i}", "assistant", in_reply_to=user.id, at=i)
        return user, reply

    turns = await asyncio.gather(*(turn(i) for i in range(50)))
    stored = [r for pair in turns for r in pair]
    assert len({r.id for r in stored}) == 100
    assert await count_index_rows(store, KEY) == 100
    assert len(await search(store, "concurrency", key=KEY, limit=100)) == 50
    assert await store.unanswered(since=T0) == []
    last = max(ids(stored)) + 1
    assert len(await store.history(KEY, before_turn_of=last, limit=1000)) == 100
    assert await index_consistency(store) == (0, 0)


async def test_cancelled_writer_leaves_store_consistent(store: Store) -> None:
    task = asyncio.create_task(add(store, "maybe stored"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await add(store, "stored afterwards")
    everything = await search(store, "stored", key=KEY)
    assert len(everything) == await count_index_rows(store, KEY)
    assert await index_consistency(store) == (0, 0)
