"""A worker that died after storing a message leaves it unanswered; a live
worker's periodic look answers it once, in order, and never a chat another
worker holds or a message that may still be on its way to an answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from core.clock import TestClock
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.conversation.recovery import QUIET_FOR, UnansweredRecovery
from core.locks import SessionLocks
from core.store.backends import Backend, open_backend
from core.store.base import NewMessage
from tests.conftest import RecordingSender
from tests.support.scripted_model import ScriptedModel

ORPHAN = "agent:main:telegram:private:1"
HELD = "agent:main:telegram:private:2"


@pytest.fixture
async def two_workers(postgres_url: str) -> AsyncIterator[tuple[Backend, Backend]]:
    first, second = open_backend(postgres_url), open_backend(postgres_url)
    async with first, second:
        yield first, second


def live_manager(live: Backend, clock: TestClock, sender: RecordingSender) -> ConversationManager:
    """A live worker's manager, guarded by the database's session lock."""
    config = KeptConfig()
    return ConversationManager(
        store=live.store,
        llm=ScriptedModel(),
        sender=sender,
        config=lambda: config,
        clock=clock,
        session_locks=SessionLocks(shared=live.session_guard),
    )


async def left_unanswered(backend: Backend, key: str, clock: TestClock, *texts: str) -> None:
    """What a worker that died mid-turn leaves: stored user messages."""
    chat = key.rsplit(":", 1)[1]
    await backend.store.ensure_session(
        key,
        agent_id="main",
        platform="telegram",
        chat_id=chat,
        chat_kind="private",
        thread_id=None,
        now=clock.now(),
    )
    for n, text in enumerate(texts):
        await backend.store.add_message(
            NewMessage(key, "user", text, clock.now(), platform_message_id=f"{chat}-{n}")
        )


async def test_a_dead_workers_unanswered_messages_are_answered_once_by_another(
    two_workers: tuple[Backend, Backend],
) -> None:
    dead, live = two_workers
    clock, sender = TestClock(), RecordingSender()
    manager = live_manager(live, clock, sender)
    recovery = UnansweredRecovery(manager, clock, lambda: {"telegram"})
    await left_unanswered(dead, ORPHAN, clock, "first", "second")
    await left_unanswered(dead, HELD, clock, "mine")

    # Just stored: its worker may still be answering it.
    assert await recovery.look() == 0
    clock.set(clock.now() + QUIET_FOR)

    # The other chat is held by a live worker (mid-turn): left to it.
    other_worker = SessionLocks(shared=dead.session_guard)
    async with other_worker.hold(HELD):
        assert await recovery.look() == 2
    assert sender.texts("1") == ["echo: first", "echo: second"]
    assert sender.texts("2") == []

    assert await recovery.look() == 1  # the held chat, once its worker let go
    assert sender.texts("2") == ["echo: mine"]
    assert await recovery.look() == 0  # nothing is answered twice
    await manager.drain()


async def test_messages_past_the_recovery_window_are_left_alone(
    two_workers: tuple[Backend, Backend],
) -> None:
    dead, live = two_workers
    clock, sender = TestClock(), RecordingSender()
    manager = live_manager(live, clock, sender)
    await left_unanswered(dead, ORPHAN, clock, "long ago")
    clock.set(clock.now() + timedelta(hours=1))
    assert await UnansweredRecovery(manager, clock, lambda: {"telegram"}).look() == 0
    assert await UnansweredRecovery(manager, clock, lambda: {"discord"}).look() == 0
    assert sender.texts() == []
    # A message inside the window, left the same way, is answered by the same look.
    await left_unanswered(dead, HELD, clock, "just now")
    clock.set(clock.now() + QUIET_FOR)
    assert await UnansweredRecovery(manager, clock, lambda: {"telegram"}).look() == 1
    assert (sender.texts("1"), sender.texts("2")) == ([], ["echo: just now"])
    await manager.drain()
