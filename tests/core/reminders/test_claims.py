"""Reminder claims: `claimed` -> `sending` -> done, with a worker id and a
lease. A claim stopped before `sending` is released and fires once later; a
`sending` claim whose lease ran out (its worker died) is never sent again; a
live claim of another worker is left alone. Gated on asyncio.Events; on each
backend."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.messages import SendResult
from core.reminders.model import Reminder
from tests.core.reminders.test_service import (
    KEY,
    THREAD,
    THREAD_KEY,
    WORKER,
    BlockingSender,
    Harness,
    ScriptedSender,
    make_harness,
    until,
    utc,
)
from tests.support.followups import store_rows
from tests.support.held_answer import HeldAnswer
from tests.support.store_helpers import open_any_store

DEAD = "dead-host:999:0badc0de"
LEASE = timedelta(minutes=5)


@pytest.fixture
async def h(storage_url: str, clock: TestClock) -> AsyncIterator[Harness]:
    async with open_any_store(storage_url) as store:
        yield await make_harness(store, clock)


async def claim_columns(h: Harness, reminder_id: str) -> tuple[Any, ...]:
    rows = await store_rows(
        h.store,
        "SELECT claim_phase, claimed_by, lease_until, claimed_at FROM reminders WHERE id = ?",
        (reminder_id,),
    )
    return tuple(rows[0])


async def dead_worker_claim(h: Harness, r: Reminder, *, sending: bool) -> None:
    now = h.clock.now()
    claimed = await h.reminders.claim(r.id, now, worker=DEAD, lease_until=now + LEASE)
    assert claimed is not None
    if sending:
        assert await h.reminders.begin_sending(
            claimed, worker=DEAD, now=now, lease_until=now + LEASE
        )


class GatedStore:
    """The real store, with `begin_sending` held until the test opens it: the
    stop then lands between the claim and `sending`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.entered = asyncio.Event()
        self.open = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def begin_sending(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        await self.open.wait()
        return await self._inner.begin_sending(*args, **kwargs)


async def test_a_stop_before_sending_releases_the_claim_and_it_fires_once_later(
    h: Harness,
) -> None:
    r = await h.add("stretch", after="1m")
    await h.clock.advance(60)
    gated = GatedStore(h.reminders)
    h.restart(store=gated)  # type: ignore[arg-type]
    task = asyncio.create_task(h.source.fire_due())
    await asyncio.wait_for(gated.entered.wait(), 1)
    assert (await claim_columns(h, r.id))[:2] == ("claimed", WORKER)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    released = await h.get(r.id)
    assert released.status == "active" and released.attempts == 1
    assert await claim_columns(h, r.id) == (None, None, None, None)
    assert h.sender.sent == []

    h.restart()
    assert await h.source.recover_missed() == 1
    assert h.sender.texts() == ["stretch"]
    assert (await h.get(r.id)).status == "done"


async def test_a_stop_while_the_claim_answers_releases_it(h: Harness) -> None:
    r = await h.add("stretch", after="1m")
    await h.clock.advance(60)
    held = HeldAnswer(h.reminders, "claim")
    h.restart(store=held)  # type: ignore[arg-type]
    task = asyncio.create_task(h.source.fire_due())
    await asyncio.wait_for(held.entered.wait(), 1)
    assert (await claim_columns(h, r.id))[:2] == ("claimed", WORKER)
    task.cancel()
    await asyncio.sleep(0)
    held.open.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await claim_columns(h, r.id) == (None, None, None, None)
    assert (await h.get(r.id)).status == "active" and h.sender.sent == []


async def test_a_live_claim_of_another_worker_is_left_alone(h: Harness) -> None:
    once = await h.add("sending", after="1m")
    other = await h.add("claimed", after="1m")
    await h.clock.advance(60)
    await dead_worker_claim(h, once, sending=True)
    await dead_worker_claim(h, other, sending=False)
    h.restart()
    assert await h.source.recover_missed() == 0
    await h.clock.advance(LEASE.total_seconds() - 1)
    assert await h.source.reap_expired_claims() == 0
    assert await h.source.fire_due() == 0
    assert h.sender.sent == []
    assert (await claim_columns(h, once.id))[:2] == ("sending", DEAD)
    assert (await claim_columns(h, other.id))[:2] == ("claimed", DEAD)
    assert await h.source.next_lease_expiry() == h.clock.now() + timedelta(seconds=1)


async def test_expired_claims_at_start_up(h: Harness, caplog) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    daily = await h.add("daily", cron="0 9 * * *")  # 08:00 UTC
    once = await h.add("one-shot", after="1h")
    unsent = await h.add("unsent", after="1h")
    h.clock.set(utc(2026, 12, 1, 8, 0))
    for r in (daily, once):
        await dead_worker_claim(h, r, sending=True)
    await dead_worker_claim(h, unsent, sending=False)
    h.clock.set(utc(2026, 12, 1, 8, 0) + LEASE)

    h.restart()
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        assert await h.source.recover_missed() == 4  # 3 claims settled, 1 fired
    assert caplog.text.count("reminder_unconfirmed") == 2
    assert h.sender.texts() == ["unsent"]  # released, then fired once
    failed = await h.get(once.id)
    assert failed.status == "failed" and "not sent again" in (failed.last_error or "")
    moved = await h.get(daily.id)
    assert (moved.status, moved.next_fire_at) == ("active", utc(2026, 12, 2, 8, 0))
    assert await h.reminders.claimed() == []
    assert await h.source.fire_due() == 0 and h.sender.texts() == ["unsent"]


async def test_a_claim_expiring_after_start_up_is_reaped_by_a_later_pass(h: Harness) -> None:
    r = await h.add("stretch", after="1m")
    await h.clock.advance(60)
    await dead_worker_claim(h, r, sending=False)
    h.restart()
    assert await h.source.recover_missed() == 0
    await h.clock.advance(LEASE.total_seconds())
    assert await h.source.reap_expired_claims() == 1
    assert await h.source.fire_due() == 1 and h.sender.texts() == ["stretch"]


async def test_a_refused_send_ends_failed_with_no_claim_left(h: Harness) -> None:
    r = await h.add("stretch", after="1m")
    await h.clock.advance(60)
    h.restart(ScriptedSender([SendResult(error="Forbidden: bot was blocked by the user")]))
    assert await h.source.fire_due() == 0
    failed = await h.get(r.id)
    assert failed.status == "failed" and "blocked" in (failed.last_error or "")
    assert await claim_columns(h, r.id) == (None, None, None, None)
    assert len(h.sender.sent) == 1


async def test_a_reminder_cancelled_before_sending_is_not_sent(h: Harness) -> None:
    """The fence: cancelled by the user between claim and `sending`."""
    r = await h.add("stretch", after="1m")
    await h.clock.advance(60)
    gated = GatedStore(h.reminders)
    h.restart(store=gated)  # type: ignore[arg-type]
    task = asyncio.create_task(h.source.fire_due())
    await asyncio.wait_for(gated.entered.wait(), 1)
    assert await h.service.cancel(r.id, agent_id="main", session_key=KEY) is not None
    gated.open.set()
    assert await asyncio.wait_for(task, 1) == 0
    assert h.sender.sent == []
    assert (await h.get(r.id)).status == "cancelled"
    assert await claim_columns(h, r.id) == (None, None, None, None)


async def test_no_new_reminder_is_claimed_once_stopping(h: Harness) -> None:
    await h.add("stretch", after="1m")
    await h.clock.advance(60)
    h.source.stop_taking_work()
    assert await h.source.fire_due() == 0 and h.sender.sent == []
    assert await h.reminders.claimed() == []
    # It was due: the next process fires it.
    h.restart()
    assert await h.source.fire_due() == 1
    assert [o.text for o in h.sender.sent] == ["stretch"]


class HeldSettle:
    """The real store, with `mark_failed` of one reminder held until the test
    opens it: that chat is still recording its interrupted send."""

    def __init__(self, inner: Any, held: str) -> None:
        self._inner = inner
        self._held = held
        self.entered = asyncio.Event()
        self.open = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def mark_failed(self, reminder_id: str, **kwargs: Any) -> Any:
        if reminder_id == self._held:
            self.entered.set()
            await self.open.wait()
        return await self._inner.mark_failed(reminder_id, **kwargs)


async def test_a_stop_ends_only_once_every_chat_has_recorded_its_send(h: Harness) -> None:
    """Two chats mid-send when the process stops: the pass does not end (and
    the store is not closed under it) while one chat is still recording."""
    held = await h.add("held", after="1m")
    other = await h.add("other", after="1m", target=THREAD, key=THREAD_KEY)
    await h.clock.advance(60)
    stuck = BlockingSender()
    gate = HeldSettle(h.reminders, held.id)
    h.restart(stuck, store=gate)  # type: ignore[arg-type]
    task = asyncio.create_task(h.source.fire_due())
    await until(lambda: len(stuck.sent) == 2)
    task.cancel()
    await asyncio.wait_for(gate.entered.wait(), 1)
    for _ in range(100):  # the other chat records its send
        if (await h.get(other.id)).status == "failed":
            break
        await asyncio.sleep(0.01)
    assert (await h.get(other.id)).status == "failed"
    done, _ = await asyncio.wait({task}, timeout=0.1)
    assert not done  # still waiting for the held chat
    gate.open.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)
    assert await h.reminders.claimed() == []
    assert (await h.get(held.id)).status == "failed"
