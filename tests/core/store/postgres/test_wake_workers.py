"""The heartbeat's wake-up across workers (LISTEN/NOTIFY): a follow-up
stored by one worker wakes another worker's sleeping heartbeat at once,
instead of at its next capped look; the listener comes back after its
connection is cut."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.commitments.model import NewCommitment, Scope
from core.config.model import KeptConfig
from core.heartbeat.source import FollowUpSource
from core.heartbeat.turn import HeartbeatTurn
from core.llm import Completion
from core.locks import SessionLocks
from core.scheduler import Scheduler
from core.store.backends import Backend, open_backend
from core.store.postgres import PostgresStore, PostgresWakeChannel
from core.wake import Wake
from tests.support.heartbeat_harness import ScriptedSender
from tests.support.pg_helpers import execute

KEY = "agent:main:telegram:private:7"
SCOPE = Scope("main", KEY, "telegram", "7", None, "u7", chat_kind="private")


class EchoModel:
    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        return Completion(text="checking in", tool_calls=[], finish_reason="stop", model="echo")


@pytest.fixture
async def two_workers(postgres_url: str) -> AsyncIterator[tuple[Backend, Backend]]:
    first, second = open_backend(postgres_url), open_backend(postgres_url)
    async with first, second:
        yield first, second


async def until(condition: Callable[[], bool], seconds: float = 3.0) -> None:
    """Wait (real time, bounded) for work running on the event loop and the
    database; the test clock never moves here."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.01)


def channel(backend: Backend) -> PostgresWakeChannel:
    assert isinstance(backend.wake_channel, PostgresWakeChannel)
    return backend.wake_channel


async def store_due_follow_up(backend: Backend, clock: TestClock) -> None:
    now = clock.now()
    await backend.store.ensure_session(
        KEY,
        agent_id="main",
        platform="telegram",
        chat_id="7",
        chat_kind="private",
        thread_id=None,
        now=now,
    )
    item = NewCommitment(
        scope=SCOPE,
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        reason="interview today",
        suggested_text="How did the interview go?",
        dedupe_key="interview",
        confidence=0.9,
        due_earliest=now - timedelta(minutes=1),
        due_latest=now + timedelta(days=1),
        due_timezone="UTC",
        source_message_id=None,
        created_at=now,
    )
    await backend.commitments.apply_extraction(SCOPE, [item], [], now=now)


async def test_a_follow_up_stored_on_one_worker_wakes_another_workers_heartbeat(
    two_workers: tuple[Backend, Backend],
) -> None:
    a, b = two_workers
    clock = TestClock()
    config = KeptConfig.model_validate({"commitments": {"enabled": True}})
    wake_a, wake_b = Wake(a.wake_channel), Wake(b.wake_channel)
    sender = ScriptedSender()
    heartbeat_b = Scheduler(
        [
            FollowUpSource(
                config=lambda: config,
                commitments=b.commitments,
                store=b.heartbeat,
                turn=HeartbeatTurn(
                    store=b.heartbeat,
                    transcript=b.store,
                    llm=EchoModel(),  # type: ignore[arg-type]
                    sender=sender,
                    clock=clock,
                    worker="b",
                ),
                clock=clock,
                platforms=lambda: {"telegram"},
                session_locks=SessionLocks(shared=b.session_guard),
            )
        ],
        clock=clock,
        wake=wake_b,
    )
    listener = asyncio.create_task(wake_b.listen(clock))
    loop = heartbeat_b.start()
    try:
        await asyncio.wait_for(channel(b).listening.wait(), 3)
        # b has looked (nothing due) and sleeps until its capped next look.
        await until(lambda: clock.sleepers >= 1 and not wake_b.event.is_set())

        await store_due_follow_up(a, clock)
        wake_a()  # what a's extraction does after storing
        await until(lambda: len(sender.sent) == 1)
        assert sender.sent[0].target.chat_id == "7"
        assert channel(b).heard == 1
    finally:
        await heartbeat_b.stop(0)
        listener.cancel()
        await asyncio.gather(loop, listener, return_exceptions=True)


async def test_the_listener_comes_back_after_its_connection_is_cut(
    two_workers: tuple[Backend, Backend], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kept.store")
    a, b = two_workers
    clock = TestClock()
    woken: list[str] = []
    listener = asyncio.create_task(channel(b).listen(lambda: woken.append("b"), clock))
    try:
        await asyncio.wait_for(channel(b).listening.wait(), 3)
        assert woken == ["b"]  # once on connecting: nudges sent before are lost
        assert isinstance(a.store, PostgresStore)
        await execute(
            a.store,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query = 'LISTEN kept_wake' AND pid <> pg_backend_pid()",
        )
        await until(lambda: "wake_listener_lost" in caplog.text and clock.sleepers >= 1)
        assert not channel(b).listening.is_set()
        await clock.advance(1)
        await asyncio.wait_for(channel(b).listening.wait(), 3)
        assert woken == ["b", "b"]
        await channel(a).publish()
        await until(lambda: len(woken) == 3)
        assert channel(b).heard == 1
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
