"""Edits, deletions, imports, reindexing (on both backends) and SQLite's
v1 → v2 migration keep the full-text index equal to the active messages
(index_consistency() == (0, 0))."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.store import ImportRow, Store
from core.store.sqlite import SqliteStore
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.fts import AGENT_SPAN, index_values
from core.store.sqlite.migrations import load_migrations
from tests.core.store.test_contract import KEY, OTHER, T0, add, add_session, ids, search
from tests.support.store_helpers import (
    count_index_rows,
    count_messages,
    deactivate,
    index_consistency,
    open_any_store,
)

B1 = "agent:b:discord:channel:9:thread:4"


@pytest.fixture
async def store(storage_url: str) -> AsyncIterator[Store]:
    """Each backend's store."""
    async with open_any_store(storage_url) as opened:
        await add_session(opened, KEY)
        await add_session(opened, OTHER)
        yield opened


@pytest.fixture
async def lite(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """The SQLite store, for checks of its FTS5 rows."""
    async with SqliteStore(tmp_path / "kept.sqlite") as opened:
        await add_session(opened, KEY)
        await add_session(opened, OTHER)
        yield opened


async def consistent(store: Store, *keys: str) -> bool:
    checks = [await index_consistency(store)]
    checks += [await index_consistency(store, key) for key in keys]
    return all(check == (0, 0) for check in checks)


def row(key: str, role: str, text: str, at: float = 0) -> ImportRow:
    return ImportRow(key, role, text, T0 + timedelta(seconds=at))  # type: ignore[arg-type]


# --- edits and deletions ------------------------------------------------------------


async def edit(store: Store, platform_id: str, text: str, chat: str = "100") -> object:
    return await store.edit_message(
        platform="telegram", chat_id=chat, platform_message_id=platform_id, text=text
    )


async def test_edit_replaces_text_and_index_row_together(store: Store) -> None:
    user = await add(store, "meet at the station", platform_message_id="1")
    reply = await add(store, "see you there", "assistant", in_reply_to=user.id)
    await store.set_platform_message_id(reply.id, "2")
    edited = await edit(store, "1", "meet at the 東京 airport")
    assert edited == (await store.get_message(user.id))
    assert await search(store, "station") == []
    assert ids(await search(store, "airport 東京")) == [user.id]
    # The bot's own messages are edited by their platform id too.
    await edit(store, "2", "see you at the gate")
    assert ids(await search(store, "gate")) == [reply.id]
    assert await count_index_rows(store) == 2
    assert await consistent(store, KEY)


async def test_edits_of_unindexed_or_hidden_rows_add_no_index_row(store: Store) -> None:
    photo = await add(store, "caption", kind="image", platform_message_id="3")
    hidden = await add(store, "hidden words", platform_message_id="4")
    await deactivate(store, hidden.id)
    await edit(store, "3", "new caption")
    await edit(store, "4", "still hidden")
    assert (await store.get_message(photo.id)).text == "new caption"  # type: ignore[union-attr]
    assert (await store.get_message(hidden.id)).text == "still hidden"  # type: ignore[union-attr]
    assert await count_index_rows(store) == 0
    assert await consistent(store, KEY)


async def test_edit_and_delete_are_scoped_to_platform_and_chat(store: Store) -> None:
    here = await add(store, "here", platform_message_id="5")
    there = await add(store, "there", key=OTHER, platform_message_id="5")
    assert await edit(store, "5", "changed", chat="999") is None
    assert not await store.delete_message(
        platform="discord", chat_id="100", platform_message_id="5"
    )
    assert await store.delete_message(platform="telegram", chat_id="200", platform_message_id="5")
    assert await store.get_message(there.id) is None
    assert ids(await search(store, "here")) == [here.id]
    assert await consistent(store, KEY, OTHER)


async def test_deleting_a_message_keeps_its_turn(store: Store) -> None:
    user = await add(store, "question words", platform_message_id="6")
    reply = await add(store, "answer words", "assistant", in_reply_to=user.id)
    assert await store.delete_message(platform="telegram", chat_id="100", platform_message_id="6")
    assert ids(await search(store, "words")) == [reply.id]
    kept = await store.get_message(reply.id)
    assert kept is not None and kept.in_reply_to is None
    assert await consistent(store, KEY)


async def test_delete_session_is_one_transaction(store: Store) -> None:
    for i in range(20):
        user = await add(store, f"doomed {i}", at=i)
        await add(store, "{}", "tool", kind="tool_result", in_reply_to=user.id, at=i)
    survivor = await add(store, "doomed survivor", key=OTHER)
    assert await store.delete_session(KEY) == 40
    assert await count_messages(store) == 1
    assert ids(await search(store, "doomed", limit=25)) == [survivor.id]
    assert await consistent(store, OTHER)


# --- import and reindex ---------------------------------------------------------------


async def test_import_stores_without_indexing_then_reindex_catches_up(store: Store) -> None:
    rows = [
        row(B1, "user", "The budget is 500 euros", 1),
        row(B1, "assistant", "Noted the budget.", 2),
        row(B1, "tool", '{"budget": 1}', 3),
        row(KEY, "user", "budget from the old bot", -5),
    ]
    await add(store, "live budget")
    assert await store.import_messages(rows) == 4
    session = await store.get_session(B1)
    assert session is not None
    assert (session.agent_id, session.platform, session.chat_id) == ("b", "discord", "9")
    assert (session.chat_kind, session.thread_id, session.created_at) == (
        "channel",
        "4",
        T0 + timedelta(seconds=1),
    )
    assert session.updated_at == T0 + timedelta(seconds=3)
    # Stored, not yet searchable, and known to be behind.
    assert sorted(await store.sessions_behind()) == sorted([KEY, B1])
    assert len(await search(store, "budget")) == 1
    assert await index_consistency(store) == (3, 0)
    assert await index_consistency(store, B1) == (2, 0)
    assert await store.reindex_session(B1) == 2
    assert await store.reindex_session(KEY) == 2
    assert await store.sessions_behind() == []
    assert len(await search(store, "budget", limit=25)) == 4
    assert await consistent(store, KEY, B1)
    # Reindexing again changes nothing.
    assert await store.reindex_session(B1) == 2
    assert await count_index_rows(store) == 4
    assert await store.reindex_session("agent:x:telegram:private:1") == 0


async def test_import_checks_every_row_before_writing(store: Store) -> None:
    good = row(B1, "user", "fine")
    for bad in [
        row("not a key", "user", "x"),
        row(B1, "system", "x"),
        ImportRow(B1, "user", "x", T0.replace(tzinfo=None)),
    ]:
        with pytest.raises(ValueError, match="import row 2"):
            await store.import_messages([good, bad])
    assert await store.get_session(B1) is None
    assert await store.import_messages([]) == 0


async def test_large_imports_are_split_into_transactions(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import core.store.sql.transcript as transcript

    monkeypatch.setattr(transcript, "IMPORT_BATCH", 7)
    rows = [row(f"agent:a:telegram:private:{i % 5}", "user", f"line {i}", i) for i in range(50)]
    assert await store.import_messages(rows) == 50
    behind = await store.sessions_behind(limit=3)
    assert len(behind) == 3
    for key in await store.sessions_behind(limit=100):
        await store.reindex_session(key)
    assert len(await search(store, "line", limit=25)) == 25
    assert await consistent(store)


async def test_mark_index_behind(store: Store) -> None:
    await add(store, "indexed")
    assert await store.mark_index_behind(KEY) == 1
    assert await store.sessions_behind() == [KEY]
    assert await store.mark_index_behind() == 2
    assert await store.mark_index_behind("agent:a:telegram:private:404") == 0
    for key in await store.sessions_behind():
        await store.reindex_session(key)
    assert await store.sessions_behind() == [] and await consistent(store, KEY, OTHER)


async def test_consistency_notices_every_kind_of_drift(lite: SqliteStore) -> None:
    record = await add(lite, "drifting")
    other = await add(lite, "elsewhere", key=OTHER)
    (slot,) = (
        await lite.connection.fetchall("SELECT agent_slot FROM sessions WHERE key = ?", (KEY,))
    )[0]
    rowid = slot * AGENT_SPAN + record.id
    with sqlite3.connect(lite.connection.path) as conn:
        conn.execute("DELETE FROM messages_fts WHERE rowid = ?", (rowid,))
    assert await index_consistency(lite) == (1, 0)
    assert await index_consistency(lite, KEY) == (1, 0)
    assert await index_consistency(lite, OTHER) == (0, 0)
    with sqlite3.connect(lite.connection.path) as conn:
        # A row claiming the wrong session is both missing and orphaned, and
        # so is a row outside its agent's rowid range.
        conn.execute(
            "INSERT INTO messages_fts(rowid, words, grams, session) VALUES (?, 'drifting', '', ?)",
            (rowid, f"s{other.session_id}"),
        )
        conn.execute(
            "INSERT INTO messages_fts(rowid, words, grams, session) "
            "VALUES (9999, 'ghost', '', 's1')"
        )
        conn.execute(
            "INSERT INTO messages_fts(rowid, words, grams, session) VALUES (?, 'elsewhere', '', ?)",
            ((slot + 7) * AGENT_SPAN + other.id, f"s{other.session_id}"),
        )
    assert await index_consistency(lite) == (1, 3)
    assert await index_consistency(lite, KEY) == (1, 1)
    assert await index_consistency(lite, OTHER) == (0, 2)
    assert await lite.reindex_session(KEY) == 1
    assert await lite.reindex_session(OTHER) == 1
    assert await consistent(lite, KEY, OTHER)


# --- migration from a v1 database --------------------------------------------------------


async def test_migration_rebuilds_a_v1_index(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    async with SqliteStore(path, migrations=load_migrations()[:1]) as v1:
        assert await v1.schema_version() == 1
    texts = [
        ("user", "text", "Une école à İstanbul", 1),
        ("assistant", "text", "我们去北京吧", 1),
        ("tool", "tool_result", "{}", 1),
        ("user", "text", "hidden before the upgrade", 0),
    ]
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO sessions(id, key, agent_id, platform, chat_id, chat_kind, created_at, "
            "updated_at) VALUES (1, ?, 'a', 'telegram', '100', 'private', 0, 0)",
            (KEY,),
        )
        for role, kind, text, active in texts:
            cursor = conn.execute(
                "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, ts, active) "
                "VALUES (1, 'telegram', '100', ?, ?, ?, 0, ?)",
                (role, kind, text, active),
            )
            if kind == "text" and active:
                conn.execute(
                    "INSERT INTO messages_fts(rowid, body) VALUES (?, ?)", (cursor.lastrowid, text)
                )
    async with SqliteStore(path) as store:
        assert await store.schema_version() == len(load_migrations())
        assert [h.snippet for h in await search(store, "ecole istanbul")] == [texts[0][2]]
        assert [h.snippet for h in await search(store, "北京")] == [texts[1][2]]
        assert await search(store, "hidden") == []
        assert await count_index_rows(store) == 2
        assert await consistent(store, KEY)
        assert await store.sessions_behind() == []


async def test_migration_moves_index_rows_into_agent_ranges(tmp_path: Path) -> None:
    path = tmp_path / "v5.sqlite"
    async with SqliteStore(path, migrations=load_migrations()[:5]) as v5:
        assert await v5.schema_version() == 5
    # Written as a v5 store did: index rowid = message id.
    with sqlite3.connect(path) as conn:
        for sid, key in ((1, KEY), (2, B1)):
            agent, platform, kind, chat = key.split(":")[1:5]
            conn.execute(
                "INSERT INTO sessions(id, key, agent_id, platform, chat_id, chat_kind, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 0, 0)",
                (sid, key, agent, platform, chat, kind),
            )
        for mid, sid, text, active in (
            (1, 1, "shared budget", 1),
            (2, 2, "shared budget", 1),
            (3, 1, "shared but hidden", 0),
            (4, 1, "gone", 1),
        ):
            conn.execute(
                "INSERT INTO messages(id, session_id, platform, chat_id, role, kind, text, ts, "
                "active, platform_message_id) SELECT ?, id, platform, chat_id, 'user', 'text', ?, "
                "0, ?, ? FROM sessions WHERE id = ?",
                (mid, text, active, f"p{mid}", sid),
            )
            if active:
                conn.execute(
                    "INSERT INTO messages_fts(rowid, words, grams, session) VALUES (?, ?, ?, ?)",
                    (mid, *index_values(text, sid)),
                )
        # An index row whose message is gone stays behind.
        conn.execute("DELETE FROM messages WHERE id = 4")
        conn.execute(
            "INSERT INTO messages_fts(rowid, words, grams, session) VALUES (4, 'gone', '', 's1')"
        )
    async with SqliteStore(path) as store:
        slots = dict(await store.connection.fetchall("SELECT agent_id, slot FROM agents"))
        assert slots == {"a": 1, "b": 2}  # in order of first appearance
        rows = await store.connection.fetchall("SELECT rowid FROM messages_fts ORDER BY rowid")
        assert [r[0] for r in rows] == [AGENT_SPAN + 1, 2 * AGENT_SPAN + 2]
        assert await consistent(store, KEY, B1)
        assert ids(await search(store, "shared", agent="a")) == [1]
        assert ids(await search(store, "shared", agent="b")) == [2]
        # Sessions created after the migration get their agent's slot, a new
        # agent the next one.
        await add_session(store, OTHER)
        await add_session(store, "agent:c:telegram:private:5")
        rows = await store.connection.fetchall("SELECT agent_slot FROM sessions ORDER BY id")
        assert [r[0] for r in rows] == [1, 2, 1, 3]
        # Deleting a message or a session takes its index rows along.
        assert await store.delete_message(
            platform="telegram", chat_id="100", platform_message_id="p1"
        )
        assert await store.delete_session(B1) == 1
        assert await count_index_rows(store) == 0
        assert await consistent(store, KEY, OTHER)
