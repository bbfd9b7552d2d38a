"""`/new` on one worker holds for every worker on the same PostgreSQL
database: the start is the session row's, read by each turn's own history
statement, never a worker's cached session record."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.clock import TestClock
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.conversation.start_over import StartOver
from core.locks import SessionLocks
from core.messages import Inbound, Target
from core.store.backends import Backend
from tests.conftest import RecordingSender
from tests.support.pg_helpers import opened_backends
from tests.support.scripted_model import ScriptedModel

KEY = "agent:main:telegram:private:42"


@pytest.fixture
async def backends(postgres_url: str) -> AsyncIterator[list[Backend]]:
    async with opened_backends(postgres_url, 2) as opened:
        yield opened


def worker(backend: Backend, model: ScriptedModel, clock: TestClock) -> ConversationManager:
    config = KeptConfig()
    return ConversationManager(
        store=backend.store,
        llm=model,
        sender=RecordingSender(),
        config=lambda: config,
        clock=clock,
        session_locks=SessionLocks(shared=backend.session_guard),
    )


def said(clock: TestClock, text: str) -> Inbound:
    return Inbound(
        agent_id="main",
        target=Target("telegram", "42"),
        chat_kind="private",
        sender_id="u42",
        text=text,
        ts=clock.now(),
    )


def contents(model: ScriptedModel) -> list[str]:
    _, messages, _ = model.requests[-1]
    return [m["content"] for m in messages[1:]]


async def test_new_on_worker_a_empties_worker_bs_next_context(backends: list[Backend]) -> None:
    clock = TestClock()
    model_a, model_b = ScriptedModel(), ScriptedModel()
    a, b = (worker(backends[0], model_a, clock), worker(backends[1], model_b, clock))
    await a.handle(said(clock, "my code word is zebra"))
    await b.handle(said(clock, "what was it?"))
    # Positive control: B read A's exchange, and now holds the session cached.
    assert contents(model_b) == [
        "my code word is zebra",
        "echo: my code word is zebra",
        "what was it?",
    ]
    assert KEY in b.sessions

    await StartOver(backends[0].store).start_over(agent_id="main", session_key=KEY, user_id="u42")
    await b.handle(said(clock, "fresh start"))
    assert contents(model_b) == ["fresh start"]
    await a.handle(said(clock, "still fresh"))
    assert contents(model_a) == ["fresh start", "echo: fresh start", "still fresh"]
