"""Off means off: `commitments.enabled: false` (read live, as `kept config
set` leaves it) stops the delivery of follow-ups already stored. They stay
pending, untouched, and go out once it is switched on again within their
window. Reminders go on either way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.config.model import KeptConfig
from core.llm import Completion
from core.messages import Target
from core.reminders import parse_schedule
from tests.support.heartbeat_harness import SCOPE, Harness, make_harness
from tests.support.scripted_model import text


@pytest.fixture
async def hb(tmp_path: Path, storage_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path, url=storage_url)
    yield harness
    await harness.store.close()


def switch(hb: Harness, enabled: bool) -> None:
    hb.config = KeptConfig.model_validate({"commitments": {"enabled": enabled}})


async def test_switched_off_nothing_is_claimed_or_consumed(hb: Harness):
    c = await hb.seed(window=6 * 3600)
    switch(hb, False)
    scheduler = hb.scheduler()
    for _ in range(3):
        await scheduler.tick()
        await hb.clock.advance(3600)
    assert hb.model.requests == [] and hb.sender.attempts == []
    kept = await hb.status(c.id)
    assert (kept.status, kept.attempts, kept.last_error) == ("pending", 0, None)


async def test_switched_on_again_within_the_window_it_is_delivered_once(hb: Harness):
    c = await hb.seed(window=6 * 3600)
    switch(hb, False)
    scheduler = hb.scheduler()
    await scheduler.tick()
    await hb.clock.advance(2 * 3600)
    await scheduler.tick()
    switch(hb, True)
    scheduler.wake(reset=True)  # what Runtime._apply_config does on a reload
    hb.model.steps.append(text("How did the interview go?"))
    await scheduler.tick()
    await hb.clock.advance(3600)
    await scheduler.tick()
    assert [o.text for o in hb.sender.sent] == ["How did the interview go?"]
    assert (await hb.status(c.id)).status == "sent"


async def test_switched_off_during_the_model_call_nothing_is_sent(hb: Harness):
    c = await hb.seed()
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: Any) -> Completion:
        entered.set()
        await gate.wait()
        return text("How did the interview go?")

    hb.model.steps.append(slow)
    tick = asyncio.create_task(hb.scheduler().tick())
    await asyncio.wait_for(entered.wait(), 1)
    switch(hb, False)
    gate.set()
    await asyncio.wait_for(tick, 1)
    assert hb.sender.attempts == []
    released = await hb.status(c.id)
    assert released.status == "pending" and "switched off" in (released.last_error or "")


async def test_switched_off_reminders_still_fire(hb: Harness):
    await hb.seed()
    switch(hb, False)
    reminders = hb.reminder_service()
    schedule = parse_schedule(at=None, after="1m", cron=None, timezone="UTC", now=hb.clock.now())
    await reminders.schedule(
        agent_id="main",
        session_key=SCOPE.session_key,
        target=Target("telegram", "42"),
        created_by="42",
        text="stretch",
        schedule=schedule,
    )
    scheduler = hb.scheduler(reminders=hb.reminder_source())
    await hb.clock.advance(60)
    await scheduler.tick()
    assert [o.text for o in hb.sender.sent] == ["stretch"]
    assert hb.model.requests == []
