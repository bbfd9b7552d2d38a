"""The manager's session cache: bounded, least recently used out, and never
serving a record of a session that was deleted meanwhile."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from core.clock import TestClock
from core.config.model import KeptConfig
from core.conversation.events import ReplyEvent
from core.conversation.manager import ConversationManager
from core.conversation.session_cache import SessionCache
from core.store import Store
from core.store.base import SessionRecord
from tests.conftest import RecordingSender
from tests.core.conversation.test_manager import inbound, make_manager
from tests.support.scripted_model import ScriptedModel


def key_of(chat: str) -> str:
    return f"agent:main:telegram:private:{chat}"


def count_upserts(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session keys `ensure_session` was called for, in order."""
    seen: list[str] = []
    upsert = store.ensure_session

    async def counting(key: str, **fields: Any) -> Any:
        seen.append(key)
        return await upsert(key, **fields)

    monkeypatch.setattr(store, "ensure_session", counting)
    return seen


def bounded_manager(
    store: Store, sender: RecordingSender, clock: TestClock, *, size: int
) -> ConversationManager:
    config = KeptConfig()
    return ConversationManager(
        store=store,
        llm=ScriptedModel(),
        sender=sender,
        config=lambda: config,
        clock=clock,
        session_cache_size=size,
    )


async def test_the_cache_keeps_the_most_recently_used_sessions_only(
    sqlite_store: Store, clock: TestClock, sender: RecordingSender, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = bounded_manager(sqlite_store, sender, clock, size=2)
    upserts = count_upserts(sqlite_store, monkeypatch)
    for n, chat in enumerate(["1", "2", "1", "3", "1", "3", "2"]):
        await manager.handle(inbound(clock, chat, f"hi {n}", msg_id=str(n)))
    # "2" was the least recently used when "3" came, so it was dropped and
    # looked up again; "1" and "3" stayed cached.
    assert upserts == [key_of("1"), key_of("2"), key_of("3"), key_of("2")]
    assert len(manager.sessions) == 2
    assert key_of("2") in manager.sessions and key_of("3") in manager.sessions
    assert key_of("1") not in manager.sessions
    assert len(sender.sent) == 7


async def test_a_hundred_chats_leave_at_most_the_cache_size_behind(
    sqlite_store: Store, clock: TestClock, sender: RecordingSender
) -> None:
    manager = bounded_manager(sqlite_store, sender, clock, size=10)
    for chat in range(100):
        await manager.handle(inbound(clock, str(chat), "hello"))
    assert len(manager.sessions) == 10
    assert len(manager._locks) == 0  # nor any lock of an idle chat
    assert len(sender.sent) == 100


async def test_a_session_deleted_and_started_again_elsewhere_is_read_again(
    sqlite_store: Store, clock: TestClock, sender: RecordingSender
) -> None:
    seen: list[ReplyEvent] = []

    async def hook(ev: ReplyEvent) -> None:
        seen.append(ev)

    manager = make_manager(sqlite_store, ScriptedModel(), sender, clock, reply_hooks=[hook])
    key = key_of("1")
    await manager.handle(inbound(clock, "1", "first"))
    await manager.handle(inbound(clock, "2", "a chat started later"))
    old = manager.sessions.get(key)
    assert old is not None
    # Another worker purges the chat and a new message there starts it again.
    await sqlite_store.delete_session(key)
    live = await sqlite_store.ensure_session(
        key,
        agent_id="main",
        platform="telegram",
        chat_id="1",
        chat_kind="private",
        thread_id=None,
        now=clock.now(),
    )
    assert live.id != old.id
    reply = await manager.handle(inbound(clock, "1", "second"))
    await manager.drain()
    assert reply is not None and reply.session_id == live.id
    assert seen[-1].session.id == live.id  # the hooks see the live session
    assert manager.sessions.get(key) == seen[-1].session


def test_session_cache_put_refreshes_and_evicts_in_use_order() -> None:
    cache = SessionCache(2)
    records = {chat: _record(chat) for chat in "abc"}
    cache.put(records["a"])
    cache.put(records["b"])
    assert cache.get(key_of("a")) is records["a"]  # "a" is now the most recent
    cache.put(records["c"])
    assert key_of("b") not in cache
    assert cache.get(key_of("a")) is records["a"]
    assert cache.get(key_of("c")) is records["c"]
    assert len(cache) == 2


def _record(chat: str) -> SessionRecord:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    return SessionRecord(
        id=ord(chat),
        key=key_of(chat),
        agent_id="main",
        platform="telegram",
        chat_id=chat,
        chat_kind="private",
        thread_id=None,
        created_at=now,
        updated_at=now,
    )
