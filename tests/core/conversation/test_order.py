"""A chat's messages are answered in stored order and once, whichever
worker holds the session: the holder first answers what the chat still owes
from before its message, and skips a message someone answered meanwhile."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from core.clock import TestClock
from core.config.model import KeptConfig
from core.conversation.manager import RECOVERY_WINDOW, ConversationManager
from core.locks import SessionLocks
from core.store import Store
from core.store.base import NewMessage
from tests.conftest import RecordingSender
from tests.core.conversation.test_manager import inbound, transcript
from tests.support.scripted_model import ScriptedModel, text

KEY = "agent:main:telegram:private:1"


def manager(
    store: Store,
    model: ScriptedModel,
    sender: RecordingSender,
    clock: TestClock,
    locks: SessionLocks,
) -> ConversationManager:
    config = KeptConfig()
    return ConversationManager(
        store=store,
        llm=model,
        sender=sender,
        config=lambda: config,
        clock=clock,
        session_locks=locks,
    )


async def test_a_message_another_worker_stored_is_answered_before_the_next(
    sqlite_store, clock, sender
) -> None:
    one = manager(sqlite_store, ScriptedModel(), sender, clock, SessionLocks())
    await one.handle(inbound(clock, "1", "first"))
    # Another worker stored "second" and has not answered it yet.
    await sqlite_store.add_message(NewMessage(KEY, "user", "second", clock.now()))
    reply = await one.handle(inbound(clock, "1", "third"))
    assert reply is not None and reply.text == "echo: third"
    assert sender.texts("1") == ["echo: first", "echo: second", "echo: third"]
    assert [t for _, _, t in await transcript(sqlite_store, KEY)] == [
        "first", "echo: first", "second", "echo: second", "third", "echo: third",
    ]  # fmt: skip


async def test_an_old_unanswered_message_is_left_to_nobody_but_its_own(
    sqlite_store, clock, sender
) -> None:
    one = manager(sqlite_store, ScriptedModel(), sender, clock, SessionLocks())
    await one.handle(inbound(clock, "1", "first"))
    await sqlite_store.add_message(NewMessage(KEY, "user", "ancient", clock.now()))
    clock.set(clock.now() + RECOVERY_WINDOW + timedelta(seconds=1))
    await one.handle(inbound(clock, "1", "now"))
    assert sender.texts("1") == ["echo: first", "echo: now"]


async def test_a_message_answered_while_another_worker_waited_is_not_answered_again(
    sqlite_store, clock
) -> None:
    # Two workers on one database; the shared locks stand in for the
    # database's session lock.
    locks = SessionLocks()
    model_a, sender_a = ScriptedModel(), RecordingSender()
    a = manager(sqlite_store, model_a, sender_a, clock, locks)
    sender_b = RecordingSender()
    b = manager(sqlite_store, ScriptedModel(), sender_b, clock, locks)
    gate, started = asyncio.Event(), asyncio.Event()

    async def slow(messages, tools):  # type: ignore[no-untyped-def]
        started.set()
        await gate.wait()
        return text("answered by a")

    model_a.steps.append(slow)
    turn = asyncio.create_task(a.handle(inbound(clock, "1", "hello")))
    await started.wait()  # A holds the session, mid model call
    # B starts meanwhile and recovers what looks unanswered: it waits for
    # the session, then finds the message answered.
    recovery = asyncio.create_task(b.recover_unanswered())
    await asyncio.sleep(0.01)
    assert not recovery.done()
    gate.set()
    await turn
    assert await recovery == 0
    assert sender_a.texts() == ["answered by a"]
    assert sender_b.texts() == []
