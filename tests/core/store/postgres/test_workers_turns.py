"""Several workers on one PostgreSQL database answer a chat's messages once
each, in stored order, one turn of a chat at a time: the database's session
lock and the "answer what the chat owes first" rule, with real stores."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from core.clock import TestClock
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.locks import SessionLocks
from core.messages import Inbound, Target
from core.store.backends import Backend, open_backend
from tests.conftest import RecordingSender
from tests.support.scripted_model import ScriptedModel


@dataclass
class Worker:
    backend: Backend
    manager: ConversationManager
    model: ScriptedModel


class JitteryModel(ScriptedModel):
    """Echoes after a random pause, so turns of different workers interleave."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self._rng = rng

    async def complete(self, role, messages, *, tools=None, temperature=None):  # type: ignore[no-untyped-def]
        await asyncio.sleep(self._rng.random() * 0.004)
        return await super().complete(role, messages, tools=tools, temperature=temperature)


@pytest.fixture
async def workers(postgres_url: str) -> AsyncIterator[tuple[list[Worker], RecordingSender]]:
    clock, config, sender = TestClock(), KeptConfig(), RecordingSender()
    rng = random.Random(7)
    started: list[Worker] = []
    try:
        for _ in range(3):
            backend = open_backend(postgres_url)
            await backend.open()
            model = JitteryModel(rng)
            manager = ConversationManager(
                store=backend.store,
                llm=model,
                sender=sender,  # one recorder: sends in the order they happened
                config=lambda: config,
                clock=clock,
                session_locks=SessionLocks(shared=backend.session_guard),
            )
            started.append(Worker(backend, manager, model))
        yield started, sender
    finally:
        for worker in started:
            await worker.manager.drain()
            await worker.backend.close()


def said(chat: int, n: int) -> Inbound:
    return Inbound(
        agent_id="main",
        target=Target("telegram", str(chat)),
        chat_kind="private",
        sender_id=f"u{chat}",
        text=f"chat {chat} message {n}",
        ts=TestClock().now(),
        platform_message_id=f"{chat}-{n}",
    )


async def test_a_burst_spread_over_three_workers_is_answered_once_in_order(workers) -> None:
    pool, sender = workers
    chats, per_chat = 40, 5

    async def chat(c: int) -> None:
        # Each message reaches a different worker than the one before; the
        # next is sent once the previous is stored (as Telegram's order).
        turns = []
        for n in range(per_chat):
            stored = asyncio.Event()
            worker = pool[(c + n) % len(pool)]
            turns.append(
                asyncio.create_task(worker.manager.handle(said(c, n), on_stored=stored.set))
            )
            await stored.wait()
        await asyncio.gather(*turns)

    await asyncio.gather(*(chat(c) for c in range(chats)))
    for c in range(chats):
        assert sender.texts(str(c)) == [f"echo: chat {c} message {n}" for n in range(per_chat)]
    assert len(sender.sent) == chats * per_chat
    assert all(w.model.requests for w in pool)  # every worker took part


async def test_one_chat_is_answered_by_one_worker_at_a_time(workers) -> None:
    (a, b, _), sender = workers
    gate, started = asyncio.Event(), asyncio.Event()

    async def slow(messages, tools):  # type: ignore[no-untyped-def]
        started.set()
        await gate.wait()
        return await ScriptedModel().complete("chat", messages)

    a.model.steps.append(slow)
    first = asyncio.create_task(a.manager.handle(said(1, 0)))
    await started.wait()
    second = asyncio.create_task(b.manager.handle(said(1, 1)))
    await asyncio.sleep(0.05)  # b stored its message and waits for the chat
    assert not second.done() and b.model.requests == []
    gate.set()
    await asyncio.gather(first, second)
    assert sender.texts("1") == ["echo: chat 1 message 0", "echo: chat 1 message 1"]
