"""A batched claim that never reaches the platform is given back at once,
not left to its lease: when the daily cap has no room, when a turn was taken
meanwhile, and when the heartbeat stops with claimed chats still queued."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.heartbeat.source import SCOPE_CONCURRENCY
from core.heartbeat.store import HeartbeatStore
from core.llm import Completion
from tests.support.heartbeat_harness import SCOPE, Harness, make_harness
from tests.support.scripted_model import text


@pytest.fixture
async def hb(tmp_path: Path, storage_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path, url=storage_url)
    yield harness
    await harness.store.close()


async def claims_left(hb: Harness) -> int:
    rows = await hb.fetchall("SELECT count(*) FROM commitments WHERE claim_phase IS NOT NULL")
    return int(rows[0][0])


async def test_a_claim_the_daily_cap_leaves_no_room_for_is_released(
    tmp_path: Path, storage_url: str
) -> None:
    hb = await make_harness(
        tmp_path,
        {"commitments": {"maxPerDay": 1}, "agents": [{"heartbeat": {"every": "1h"}}]},
        url=storage_url,
    )
    try:
        first = await hb.seed(text="follow-up 0", key="k0", due_in=-10)
        second = await hb.seed(text="follow-up 1", key="k1", due_in=-5)
        hb.model.steps.append(text("Checking in."))
        scheduler = hb.scheduler()
        await scheduler.tick()
        assert (await hb.status(first.id)).status == "sent"
        # The interval has passed, the cap has not: the second is claimed
        # with the page, then found no room under the chat's lock.
        await hb.clock.advance(2 * 3600)
        await scheduler.tick()
        assert len(hb.sender.sent) == 1
        assert (await hb.status(second.id)).status == "pending"
        assert await claims_left(hb) == 0
    finally:
        await hb.store.close()


class StaleLastTurns:
    """The heartbeat store, whose page-time read of the last turns misses
    one another worker records before the chat's lock is taken."""

    def __init__(self, inner: HeartbeatStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def last_turns(self, keys: Any) -> dict[tuple[str, str], datetime]:
        return {}


async def test_a_claim_whose_chat_had_a_turn_meanwhile_is_released(hb: Harness) -> None:
    c = await hb.seed()
    # Another worker's turn in the chat, recorded after this worker's page read.
    await hb.heartbeat.record_turn_unless_recent(
        SCOPE.agent_id, SCOPE.session_key, now=hb.clock.now(), every=timedelta(0)
    )
    hb.heartbeat = StaleLastTurns(hb.heartbeat)  # type: ignore[assignment]
    await hb.scheduler().tick()
    assert hb.model.requests == [] and hb.sender.attempts == []
    assert (await hb.status(c.id)).status == "pending"
    assert await claims_left(hb) == 0


class HeldTurns:
    """A model step for every turn: each call waits until the test opens it."""

    def __init__(self, expected: int) -> None:
        self.calls = 0
        self.expected = expected
        self.all_in = asyncio.Event()
        self.open = asyncio.Event()

    async def __call__(self, messages: list[dict[str, Any]], tools: Any) -> Completion:
        self.calls += 1
        if self.calls >= self.expected:
            self.all_in.set()
        await self.open.wait()
        return text("How did it go?")


async def test_a_graceful_stop_runs_the_turns_under_way_and_releases_the_queued(
    hb: Harness,
) -> None:
    """Stopped with grace while every turn is in its model call: those turns
    finish and send, the claimed chats still queued are released unsent."""
    chats = SCOPE_CONCURRENCY * 3
    for n in range(chats):
        await hb.seed(
            replace(SCOPE, session_key=f"agent:main:telegram:private:{n}", chat_id=str(n))
        )
    held = HeldTurns(expected=SCOPE_CONCURRENCY)
    hb.model.steps.extend([held] * chats)
    scheduler = hb.scheduler()
    scheduler.start()
    await asyncio.wait_for(held.all_in.wait(), 2)
    assert await claims_left(hb) > SCOPE_CONCURRENCY

    stopping = asyncio.create_task(scheduler.stop(grace=60))
    await asyncio.sleep(0)  # stop() has begun: no new work is taken
    held.open.set()
    await asyncio.wait_for(stopping, 5)
    assert len(hb.sender.sent) == SCOPE_CONCURRENCY
    assert held.calls == SCOPE_CONCURRENCY
    assert await claims_left(hb) == 0
    pending = await hb.fetchall("SELECT count(*) FROM commitments WHERE status = 'pending'")
    assert pending[0][0] == chats - SCOPE_CONCURRENCY
