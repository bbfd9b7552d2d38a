"""Reminder times are read in the zone of the user who asked (their own, set
with /timezone), not the agent's; across the DST changes a daily 09:00 stays
09:00 local. And snoozing a fired occurrence moves that occurrence only."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.commands.wording import reminder_refused
from core.messages import Target
from core.reminders import (
    ReminderFiring,
    ReminderService,
    ReminderSource,
    register_reminder_tools,
)
from core.reminders.snooze import snooze_fired
from core.store.backends import Backend, open_backend
from core.tools import ToolContext, ToolRegistry
from core.users import UserZones
from tests.conftest import RecordingSender

KEY = "agent:main:telegram:private:42"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


@dataclass
class World:
    backend: Backend
    clock: TestClock
    service: ReminderService
    source: ReminderSource
    zones: UserZones
    tools: ToolRegistry
    sender: RecordingSender

    async def call(self, name: str, user: str = "42", **args: Any) -> Any:
        ctx = ToolContext("main", KEY, Target("telegram", "42"), "private", user, self.clock.now())
        return json.loads(await self.tools.call(name, json.dumps(args), ctx))

    async def run(self, occurrences: int) -> list[datetime]:
        """Sleep to each next due time and fire, as the heartbeat does."""
        fired: list[datetime] = []
        for _ in range(occurrences):
            due = await self.source.next_due()
            assert due is not None
            self.clock.set(due - timedelta(seconds=1))
            assert await self.source.fire_due() == 0
            self.clock.set(due)
            assert await self.source.fire_due() == 1
            fired.append(self.clock.now())
        return fired


@pytest.fixture
async def world(storage_url: str) -> AsyncIterator[World]:
    clock = TestClock()
    async with open_backend(storage_url) as backend:
        await backend.store.ensure_session(
            KEY,
            agent_id="main",
            platform="telegram",
            chat_id="42",
            chat_kind="private",
            thread_id=None,
            now=clock.now(),
        )
        sender = RecordingSender()
        service = ReminderService(backend.reminders, clock)
        firing = ReminderFiring(
            store=backend.reminders,
            transcript=backend.store,
            sender=sender,
            clock=clock,
            platforms=lambda: {"telegram"},
            worker="w",
        )
        source = ReminderSource(
            store=backend.reminders, firing=firing, clock=clock, platforms=lambda: {"telegram"}
        )
        # The agent's zone is UTC: every local time below is the user's own.
        zones = UserZones(backend.user_zones, lambda _agent: "UTC")
        tools = ToolRegistry()
        register_reminder_tools(tools, service, refusal=reminder_refused, zones=zones)
        yield World(backend, clock, service, source, zones, tools, sender)


async def test_a_tokyo_users_9am_fires_at_0900_in_tokyo(world: World) -> None:
    world.clock.set(utc(2026, 12, 1, 12, 0))  # 21:00 in Tokyo
    await world.zones.set("telegram", "42", "Asia/Tokyo", now=world.clock.now())
    made = await world.call("schedule_reminder", text="Call Ken", at="9am")
    assert made["timezone"] == "Asia/Tokyo" and made["next_fire_at"].startswith("2026-12-02T09:00")
    assert await world.run(1) == [utc(2026, 12, 2, 0, 0)]  # 09:00 JST
    assert world.sender.texts() == ["Call Ken"]
    listed = await world.call("list_reminders")
    assert listed["timezone"] == "Asia/Tokyo"
    # Someone without a zone of their own gets the agent's.
    assert (await world.call("list_reminders", user="43"))["timezone"] == "UTC"


async def test_a_daily_9am_cron_stays_0900_paris_across_the_march_change(world: World) -> None:
    world.clock.set(utc(2026, 3, 27, 12, 0))
    await world.zones.set("telegram", "42", "Europe/Paris", now=world.clock.now())
    await world.call("schedule_reminder", text="standup", cron="0 9 * * *")
    assert await world.run(3) == [
        utc(2026, 3, 28, 8, 0),  # CET, UTC+1
        utc(2026, 3, 29, 7, 0),  # the change is that night: CEST, UTC+2
        utc(2026, 3, 30, 7, 0),
    ]


async def test_a_daily_9am_cron_stays_0900_paris_across_the_october_change(world: World) -> None:
    world.clock.set(utc(2026, 10, 23, 12, 0))
    await world.zones.set("telegram", "42", "Europe/Paris", now=world.clock.now())
    await world.call("schedule_reminder", text="standup", cron="0 9 * * *")
    assert await world.run(3) == [
        utc(2026, 10, 24, 7, 0),  # CEST
        utc(2026, 10, 25, 8, 0),  # back to CET that night
        utc(2026, 10, 26, 8, 0),
    ]


@pytest.mark.parametrize(
    ("asked_at", "fires_at"),
    [
        # Saturday evening before the March change: Sunday's 09:00 is CEST.
        (utc(2026, 3, 28, 20, 0), utc(2026, 3, 29, 7, 0)),
        # The day after it: Monday's 09:00, CEST.
        (utc(2026, 3, 29, 10, 0), utc(2026, 3, 30, 7, 0)),
        # Saturday evening before the October change: Sunday's 09:00 is CET.
        (utc(2026, 10, 24, 20, 0), utc(2026, 10, 25, 8, 0)),
    ],
)
async def test_at_9am_around_a_change_is_the_next_0900_paris(
    world: World, asked_at: datetime, fires_at: datetime
) -> None:
    world.clock.set(asked_at)
    await world.zones.set("telegram", "42", "Europe/Paris", now=asked_at)
    await world.call("schedule_reminder", text="bins", at="9am")
    assert await world.run(1) == [fires_at]


async def test_snoozing_a_fired_cron_occurrence_leaves_the_series_alone(world: World) -> None:
    world.clock.set(utc(2026, 3, 27, 12, 0))
    await world.zones.set("telegram", "42", "Europe/Paris", now=world.clock.now())
    made = await world.call("schedule_reminder", text="standup", cron="0 9 * * *")
    await world.run(1)  # Sat 28 March 09:00 CET
    fired = await world.backend.reminders.get(made["id"])
    assert fired is not None
    snoozed = await snooze_fired(
        world.backend.reminders,
        fired,
        firing=fired.attempts,
        until=world.clock.now() + timedelta(hours=1),
        now=world.clock.now(),
    )
    assert not isinstance(snoozed, str) and snoozed.cron == "0 9 * * *"
    assert snoozed.next_fire_at == utc(2026, 3, 28, 9, 0)
    # Once more an hour later, then the series' own times: Sunday 09:00 is CEST.
    assert await world.run(2) == [utc(2026, 3, 28, 9, 0), utc(2026, 3, 29, 7, 0)]
    assert world.sender.texts() == ["standup"] * 3
