"""`/new`'s core: after a chat starts over, no model call of the chat reads
its earlier messages, while they stay stored and searchable; the start is
in the database, so a restarted process sees it. On both backends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.commitments.batch import BatchExtractor
from core.commitments.exchange import Exchange
from core.commitments.jobs import ExtractionJob
from core.commitments.model import Scope
from core.commitments.pause import Pauses
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.conversation.start_over import StartOver
from core.messages import Inbound, Target
from core.search.redact import Redactor
from core.store.backends import Backend, open_backend
from core.store.base import NewMessage, SearchScope
from tests.conftest import RecordingSender
from tests.support.scripted_model import ScriptedModel, text

KEY = "agent:main:telegram:private:42"
OTHER = "agent:main:telegram:private:43"


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    opened = open_backend(storage_url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def manager_on(backend: Backend, model: ScriptedModel, clock: TestClock) -> ConversationManager:
    config = KeptConfig()
    return ConversationManager(
        store=backend.store,
        llm=model,
        sender=RecordingSender(),
        config=lambda: config,
        clock=clock,
    )


def said(clock: TestClock, text: str, chat: str = "42") -> Inbound:
    return Inbound(
        agent_id="main",
        target=Target("telegram", chat),
        chat_kind="private",
        sender_id=f"u{chat}",
        text=text,
        ts=clock.now(),
    )


def contents(model: ScriptedModel) -> list[str]:
    """What the last chat request carried after its system prompt."""
    _, messages, _ = model.requests[-1]
    return [m["content"] for m in messages[1:]]


async def start_over(backend: Backend, key: str = KEY) -> None:
    await StartOver(backend.store).start_over(agent_id="main", session_key=key, user_id="u42")


async def test_after_new_the_model_sees_only_the_new_conversation(backend: Backend) -> None:
    clock, model = TestClock(), ScriptedModel()
    manager = manager_on(backend, model, clock)
    await manager.handle(said(clock, "my code word is zebra"))
    await manager.handle(said(clock, "what is it?"))
    # Positive control: before /new the earlier exchange is in the context.
    assert contents(model) == [
        "my code word is zebra",
        "echo: my code word is zebra",
        "what is it?",
    ]

    await start_over(backend)
    await manager.handle(said(clock, "fresh start"))
    assert contents(model) == ["fresh start"]
    await manager.handle(said(clock, "and then"))
    # The new conversation builds up as any does.
    assert contents(model) == ["fresh start", "echo: fresh start", "and then"]

    # The earlier messages stay stored and searchable.
    hits = await backend.store.search(
        "zebra", scope=SearchScope(session_key=KEY), limit=5, redactor=Redactor()
    )
    assert sorted(h.snippet for h in hits) == [
        "echo: my code word is zebra",
        "my code word is zebra",
    ]
    whole = await backend.store.history(KEY, before_turn_of=2**62, limit=100, whole=True)
    assert [m.text for m in whole][:2] == ["my code word is zebra", "echo: my code word is zebra"]
    assert len(whole) == 8


async def test_another_chat_is_not_started_over(backend: Backend) -> None:
    clock, model = TestClock(), ScriptedModel()
    manager = manager_on(backend, model, clock)
    await manager.handle(said(clock, "mine", chat="42"))
    await manager.handle(said(clock, "theirs", chat="43"))
    await start_over(backend, KEY)
    await manager.handle(said(clock, "theirs again", chat="43"))
    assert contents(model) == ["theirs", "echo: theirs", "theirs again"]
    starts = await backend.store.context_starts([KEY, OTHER, "agent:main:x:private:1"])
    assert list(starts) == [KEY]


async def test_the_start_survives_a_restart(storage_url: str) -> None:
    clock, model = TestClock(), ScriptedModel()
    first = open_backend(storage_url)
    await first.open()
    manager = manager_on(first, model, clock)
    await manager.handle(said(clock, "before the restart and the start"))
    await start_over(first)
    await first.close()

    again = open_backend(storage_url)
    await again.open()
    try:
        restarted = manager_on(again, model, clock)
        await restarted.handle(said(clock, "after the restart"))
        assert contents(model) == ["after the restart"]
    finally:
        await again.close()


async def test_a_message_unanswered_before_new_is_not_answered_after(backend: Backend) -> None:
    clock, model = TestClock(), ScriptedModel()
    manager = manager_on(backend, model, clock)
    store = backend.store
    for key, chat in ((KEY, "42"), (OTHER, "43")):
        await store.ensure_session(
            key, agent_id="main", platform="telegram", chat_id=chat, chat_kind="private",
            thread_id=None, now=clock.now(),
        )  # fmt: skip
        # Stored, never answered (the process stopped mid-turn).
        await store.add_message(NewMessage(key, "user", f"left over in {chat}", clock.now()))
    await start_over(backend, KEY)
    clock.set(clock.now() + timedelta(minutes=2))

    # Positive control: the chat that did not start over is answered.
    assert await manager.recover_unanswered() == 1
    assert contents(model) == ["left over in 43"]
    assert [m.text for m in await store.unanswered(since=clock.now() - timedelta(hours=1))] == []

    # The next message of the chat that started over is answered alone.
    await manager.handle(said(clock, "hello again"))
    assert contents(model) == ["hello again"]
    assert len(model.requests) == 2


async def test_a_reply_never_sent_before_new_is_not_sent_after(backend: Backend) -> None:
    clock = TestClock()
    sender = RecordingSender()
    config = KeptConfig()
    manager = ConversationManager(
        store=backend.store, llm=ScriptedModel(), sender=sender, config=lambda: config, clock=clock
    )
    store = backend.store
    for key, chat in ((KEY, "42"), (OTHER, "43")):
        await store.ensure_session(
            key, agent_id="main", platform="telegram", chat_id=chat, chat_kind="private",
            thread_id=None, now=clock.now(),
        )  # fmt: skip
        user = await store.add_message(NewMessage(key, "user", f"asked in {chat}", clock.now()))
        # The answer was stored; the process stopped before it left.
        await store.add_message(
            NewMessage(
                key, "assistant", f"answer in {chat}", clock.now(), in_reply_to=user.id,
                send_state="stored",
            )
        )  # fmt: skip
    await start_over(backend, KEY)
    clock.set(clock.now() + timedelta(minutes=2))

    assert await manager.recover_unanswered() == 1
    assert sender.texts() == ["answer in 43"]  # the chat that did not start over


async def test_a_start_never_moves_back(backend: Backend) -> None:
    clock, model = TestClock(), ScriptedModel()
    manager = manager_on(backend, model, clock)
    await manager.handle(said(clock, "one"))
    await start_over(backend)
    [first] = (await backend.store.context_starts([KEY])).values()
    await manager.handle(said(clock, "two"))
    await start_over(backend)
    [second] = (await backend.store.context_starts([KEY])).values()
    assert second > first
    assert await backend.store.start_over("agent:main:telegram:private:404") is False


# --- extraction ---------------------------------------------------------------


def _scope() -> Scope:
    return Scope("main", KEY, "telegram", "42", None, "u42", chat_kind="private")


async def test_extraction_never_shows_both_sides_of_a_start(backend: Backend) -> None:
    """A batch holding exchanges from before and after the chat started over
    makes one call per side: the model reading the new conversation's
    exchange never sees the earlier one."""
    clock, model = TestClock(), ScriptedModel()
    manager = manager_on(backend, model, clock)
    before = await manager.handle(said(clock, "my code word is zebra"))
    await start_over(backend)
    after = await manager.handle(said(clock, "a new topic"))
    assert before is not None and after is not None and before.in_reply_to is not None
    assert after.in_reply_to is not None
    jobs = [
        ExtractionJob(1, _scope(), Exchange(before.in_reply_to, "my code word is zebra", "ok")),
        ExtractionJob(2, _scope(), Exchange(after.in_reply_to, "a new topic", "ok")),
    ]
    extraction = ScriptedModel()
    answer = json.dumps({"candidates": [], "resolved": []})
    # Every exchange goes to the model (no cue needed), so the calls show the split.
    config = KeptConfig.model_validate({"commitments": {"prefilter": False}})

    def extractor(starts: Any) -> BatchExtractor:
        return BatchExtractor(
            store=backend.commitments,
            llm=extraction,
            config=lambda: config,
            clock=clock,
            pauses=Pauses(backend.extraction_pauses, clock, timedelta(minutes=10)),
            exchanges_per_call=4,
            backlog_exchanges_per_call=8,
            concurrency=1,
            on_stored=None,
            starts=starts,
        )

    def exchanges_sent() -> list[list[str]]:
        sent = []
        for _, messages, _ in extraction.requests:
            sent.append([e["user"] for e in json.loads(messages[-1]["content"])["exchanges"]])
        return sent

    # Positive control: without the chat's start both share one call.
    extraction.steps = [text(answer)]
    await extractor(None).process("main", jobs)
    assert exchanges_sent() == [["my code word is zebra", "a new topic"]]

    extraction.requests.clear()
    extraction.steps = [text(answer), text(answer)]
    await extractor(backend.store).process("main", jobs)
    assert exchanges_sent() == [["my code word is zebra"], ["a new topic"]]
