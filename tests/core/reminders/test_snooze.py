"""Snoozing a fired reminder (its message's "Snooze 10 min" / "Snooze 1 h"),
on both backends: it comes back once, a second press or a press under an
older message changes nothing, and a recurring reminder keeps its schedule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.messages import Outbound, ReminderSnooze, reminder_snooze_actions
from core.reminders.model import Reminder
from core.reminders.snooze import snooze_fired
from core.store import Store
from tests.core.reminders.test_service import CHAT, KEY, Harness, make_harness, utc


async def snooze(
    h: Any, r: Reminder | None, *, firing: int, delay: timedelta, **scope: str
) -> Reminder | str:
    """A fired reminder's snooze as the command layer asks for it."""
    assert r is not None
    now = h.service.clock.now()
    return await snooze_fired(
        h.service.store, r, firing=firing, until=now + delay, now=now, wake=h.service.wake, **scope
    )


TEN = timedelta(minutes=10)


@pytest.fixture
async def h(any_store: Store, clock: TestClock) -> Harness:
    return await make_harness(any_store, clock)


def snooze_of(outbound: Outbound, minutes: int) -> ReminderSnooze:
    """The Snooze button the fired message carried."""
    return next(
        a for a in outbound.actions if isinstance(a, ReminderSnooze) and a.minutes == minutes
    )


async def test_a_fired_reminder_carries_its_snooze_buttons(h: Harness) -> None:
    r = await h.add(after="20m")
    await h.clock.advance(20 * 60)
    assert await h.source.fire_due() == 1
    [sent] = h.sender.sent
    assert sent == Outbound(target=CHAT, text="stretch", actions=reminder_snooze_actions(r.id, 1))
    assert [a.minutes for a in sent.actions] == [10, 60]  # type: ignore[union-attr]


async def test_a_snoozed_one_shot_fires_again_once_after_the_delay(h: Harness) -> None:
    r = await h.add(after="20m")
    await h.clock.advance(20 * 60)
    await h.source.fire_due()
    press = snooze_of(h.sender.sent[0], 10)
    wakes = h.wakes

    snoozed = await snooze(h, await h.get(r.id), firing=press.firing, delay=TEN)
    assert not isinstance(snoozed, str)
    assert (snoozed.status, snoozed.next_fire_at) == ("active", h.clock.now() + TEN)
    assert h.wakes == wakes + 1  # the sleeping scheduler looks again

    # A second press of either button changes nothing.
    again = await snooze(h, await h.get(r.id), firing=press.firing, delay=TEN)
    assert again == "already snoozed"
    assert (await h.get(r.id)).next_fire_at == h.clock.now() + TEN

    await h.clock.advance(10 * 60 - 1)
    assert await h.source.fire_due() == 0
    await h.clock.advance(1)
    assert await h.source.fire_due() == 1
    assert h.sender.texts() == ["stretch", "stretch"]
    assert (await h.get(r.id)).status == "done"
    await h.clock.advance(3600)
    assert await h.source.fire_due() == 0 and len(h.sender.sent) == 2

    # The first message's button is stale now; the second's works.
    stale = await snooze(h, await h.get(r.id), firing=press.firing, delay=TEN)
    assert stale == "this button no longer works"
    fresh = snooze_of(h.sender.sent[1], 60)
    assert fresh.firing == press.firing + 1
    assert not isinstance(await snooze(h, await h.get(r.id), firing=fresh.firing, delay=TEN), str)


async def test_a_snoozed_cron_occurrence_comes_back_and_the_schedule_stays(h: Harness) -> None:
    h.clock.set(utc(2026, 11, 30, 7, 0))
    r = await h.add("standup", cron="0 9 * * *")  # 08:00 UTC in Paris
    h.clock.set(utc(2026, 11, 30, 8, 0))
    assert await h.source.fire_due() == 1
    press = snooze_of(h.sender.sent[0], 60)
    tomorrow = utc(2026, 12, 1, 8, 0)
    assert (await h.get(r.id)).next_fire_at == tomorrow

    snoozed = await snooze(h, await h.get(r.id), firing=press.firing, delay=timedelta(hours=1))
    assert not isinstance(snoozed, str) and snoozed.next_fire_at == utc(2026, 11, 30, 9, 0)
    assert snoozed.cron == "0 9 * * *"
    # The other button of the same message, pressed after: nothing changes.
    again = await snooze(h, await h.get(r.id), firing=press.firing, delay=TEN)
    assert again == "already snoozed"
    assert (await h.get(r.id)).next_fire_at == utc(2026, 11, 30, 9, 0)
    h.clock.set(utc(2026, 11, 30, 9, 0))
    assert await h.source.fire_due() == 1
    assert (await h.get(r.id)).next_fire_at == tomorrow  # the schedule is unchanged
    h.clock.set(tomorrow)
    assert await h.source.fire_due() == 1
    assert h.sender.texts() == ["standup"] * 3


async def test_a_cron_snooze_past_its_next_time_is_refused(h: Harness) -> None:
    h.clock.set(utc(2026, 11, 30, 7, 0))
    r = await h.add("drink water", cron="*/30 * * * *")
    h.clock.set(utc(2026, 11, 30, 7, 30))
    await h.source.fire_due()
    press = snooze_of(h.sender.sent[0], 60)
    refused = await snooze(h, await h.get(r.id), firing=press.firing, delay=timedelta(hours=1))
    assert refused == "its next time comes sooner"
    assert (await h.get(r.id)).next_fire_at == utc(2026, 11, 30, 8, 0)


async def test_cancelled_or_another_chats_reminder_is_not_snoozed(h: Harness) -> None:
    r = await h.add(after="20m")
    await h.clock.advance(20 * 60)
    await h.source.fire_due()
    fired = await h.get(r.id)
    wrong_chat = await snooze(
        h, fired, firing=1, delay=TEN, session_key="agent:main:telegram:private:43"
    )
    assert wrong_chat == "this button no longer works"
    assert (await h.get(r.id)).status == "done"
    assert await snooze(h, fired, firing=1, delay=TEN, session_key=KEY) != (
        "this button no longer works"
    )
    await h.service.cancel(r.id)
    assert await snooze(h, await h.get(r.id), firing=1, delay=TEN) == "cancelled"
