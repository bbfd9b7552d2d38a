"""Access is checked when something is sent, not only when it was created: a
chat that is no longer served (its member revoked or blocked, its group
removed) gets neither its follow-ups nor its reminders. A follow-up stays
pending, its claim released, no model call made, and goes out once the chat
is served again within its window; a reminder's firing is skipped and
logged (a repeating one moves on, a one-shot one ends `failed`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.llm import Completion
from core.messages import ChatKind, Target
from core.reminders import parse_schedule
from core.reminders.model import Reminder
from tests.support.heartbeat_harness import SCOPE, Harness, make_harness
from tests.support.scripted_model import text


class Gate:
    """An AccessCheck that the test opens and closes."""

    def __init__(self) -> None:
        self.open = True
        # Answers given first, before `open` decides (True: served).
        self.first: list[bool] = []
        self.asked: list[tuple[Target, ChatKind, str | None]] = []

    async def refusal(self, target: Target, chat_kind: ChatKind, member: str | None) -> str | None:
        self.asked.append((target, chat_kind, member))
        served = self.first.pop(0) if self.first else self.open
        return None if served else "user 42 is not approved"


@pytest.fixture
async def hb(tmp_path: Path, storage_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path, url=storage_url)
    yield harness
    await harness.store.close()


def gated(hb: Harness) -> Gate:
    gate = Gate()
    hb.access = gate
    return gate


async def claims(hb: Harness, commitment_id: str) -> list[tuple[Any, ...]]:
    return await hb.fetchall(
        "SELECT claimed_by FROM commitments WHERE id = ? AND claimed_by IS NOT NULL",
        (commitment_id,),
    )


async def test_a_followup_of_a_chat_not_served_stays_pending_without_a_model_call(hb: Harness):
    c = await hb.seed(window=6 * 3600)
    gate = gated(hb)
    gate.open = False
    scheduler = hb.scheduler()
    for _ in range(3):
        await scheduler.tick()
        await hb.clock.advance(600)
    assert hb.model.requests == [] and hb.sender.attempts == []
    kept = await hb.status(c.id)
    # Not even claimed: a chat that is not served costs no claim, no turn.
    assert (kept.status, kept.attempts) == ("pending", 0) and await claims(hb, c.id) == []
    # The member of the private chat is who was asked about.
    assert gate.asked[0] == (Target("telegram", "42"), "private", "42")


async def test_served_again_within_the_window_the_followup_is_delivered_once(hb: Harness):
    c = await hb.seed(window=6 * 3600)
    gate = gated(hb)
    gate.open = False
    scheduler = hb.scheduler()
    await scheduler.tick()
    await hb.clock.advance(3600)
    await scheduler.tick()
    gate.open = True
    hb.model.steps.append(text("How did the interview go?"))
    await hb.clock.advance(120)  # past the retry of a chat not served
    await scheduler.tick()
    await hb.clock.advance(3600)
    await scheduler.tick()
    assert [o.text for o in hb.sender.sent] == ["How did the interview go?"]
    assert (await hb.status(c.id)).status == "sent"


async def test_refused_between_claim_and_model_call_the_model_is_not_asked(hb: Harness):
    c = await hb.seed()
    gate = gated(hb)
    gate.first, gate.open = [True], False  # served when claimed, not at the turn
    await hb.scheduler().tick()
    assert hb.model.requests == [] and hb.sender.attempts == []
    released = await hb.status(c.id)
    assert (released.status, released.attempts) == ("pending", 1)
    assert "not served" in (released.last_error or "") and await claims(hb, c.id) == []


async def test_refused_during_the_model_call_nothing_is_sent_and_the_claim_is_released(
    hb: Harness,
):
    c = await hb.seed()
    gate = gated(hb)
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: Any) -> Completion:
        entered.set()
        await release.wait()
        return text("How did the interview go?")

    hb.model.steps.append(slow)
    tick = asyncio.create_task(hb.scheduler().tick())
    await asyncio.wait_for(entered.wait(), 1)
    gate.open = False  # revoked while the model writes
    release.set()
    await asyncio.wait_for(tick, 1)
    assert hb.sender.attempts == []
    released = await hb.status(c.id)
    assert released.status == "pending" and "not served" in (released.last_error or "")
    assert await claims(hb, c.id) == []


async def reminder(hb: Harness, *, cron: str | None = None) -> Reminder:
    await hb.store.ensure_session(
        SCOPE.session_key,
        agent_id="main",
        platform="telegram",
        chat_id="42",
        chat_kind="private",
        thread_id=None,
        now=hb.clock.now(),
    )
    service = hb.reminder_service()
    schedule = parse_schedule(
        at=None,
        after=None if cron else "1m",
        cron=cron,
        timezone="UTC",
        now=hb.clock.now(),
    )
    return await service.schedule(
        agent_id="main",
        session_key=SCOPE.session_key,
        target=Target("telegram", "42"),
        created_by="42",
        text="take my meds",
        schedule=schedule,
    )


async def test_a_one_shot_reminder_of_a_chat_not_served_is_skipped_logged_and_ends(
    hb: Harness, caplog: pytest.LogCaptureFixture
):
    gate = gated(hb)
    r = await reminder(hb)
    gate.open = False
    service, source = hb.reminder_service(), hb.reminder_source()
    await hb.clock.advance(60)
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        assert await source.fire_due() == 0
    assert hb.sender.attempts == []
    ended = await service.store.get(r.id)
    assert ended is not None and ended.status == "failed"
    assert ended.last_error == "not sent: user 42 is not approved"
    assert ended.claimed_at is None
    assert "reminder_skipped_not_served" in caplog.text and r.id in caplog.text
    assert "kept pairing approve" in caplog.text
    # It does not come back when the chat is served again: that firing ended.
    gate.open = True
    await hb.clock.advance(3600)
    assert await source.fire_due() == 0 and hb.sender.attempts == []


async def test_a_repeating_reminder_of_a_chat_not_served_moves_on_and_fires_when_served(
    hb: Harness, caplog: pytest.LogCaptureFixture
):
    gate = gated(hb)
    r = await reminder(hb, cron="0 * * * *")
    gate.open = False
    service, source = hb.reminder_service(), hb.reminder_source()
    await hb.clock.advance((r.next_fire_at - hb.clock.now()).total_seconds())
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        await source.fire_due()
    assert hb.sender.attempts == []
    moved = await service.store.get(r.id)
    assert moved is not None and moved.status == "active"
    assert moved.next_fire_at > r.next_fire_at and moved.claimed_at is None
    assert "reminder_skipped_not_served" in caplog.text and "moved_on" in caplog.text
    gate.open = True
    await hb.clock.advance((moved.next_fire_at - hb.clock.now()).total_seconds())
    assert await source.fire_due() == 1
    assert [o.text for o in hb.sender.sent] == ["take my meds"]


class Unreadable:
    """An AccessCheck whose pairing store cannot be read."""

    async def refusal(self, target: Target, chat_kind: ChatKind, member: str | None) -> str | None:
        raise OSError("database is locked")


async def test_a_reminder_whose_access_cannot_be_checked_is_released_not_ended(
    hb: Harness, caplog: pytest.LogCaptureFixture
):
    r = await reminder(hb)
    hb.access = Unreadable()
    service, source = hb.reminder_service(), hb.reminder_source()
    await hb.clock.advance(60)
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        assert await source.fire_due() == 0
    assert hb.sender.attempts == []
    waiting = await service.store.get(r.id)
    assert waiting is not None and (waiting.status, waiting.claimed_at) == ("active", None)
    assert "reminder_access_check_failed" in caplog.text
    # Once access can be checked again, it fires.
    hb.access = None
    assert await hb.reminder_source().fire_due() == 1
    assert [o.text for o in hb.sender.sent] == ["take my meds"]
