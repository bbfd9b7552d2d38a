"""The reminder limits (issue 26): at most `limits.perUser.activeReminders`
active reminders per platform user, and no repeating one closer than
`reminders.minInterval`; both read from the live config at each creation,
refused with one line (core/commands/wording.py) the model relays."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.commands.wording import reminder_refused
from core.config.model import KeptConfig, LimitsConfig, PerUserLimits, RemindersConfig
from core.conversation.manager import ConversationManager
from core.llm import ToolCall
from core.messages import Inbound, Target
from core.reminders import ReminderService, register_reminder_tools
from core.reminders.limits import ReminderLimits, RepeatsTooOften, TooManyReminders
from core.reminders.model import NewReminder
from core.reminders.schedule import cron_firings, parse_schedule, shortest_cron_gap
from core.store.backends import Backend, open_backend
from core.store.sql.database import Transaction
from core.store.sql.reminders import COUNT_ACTIVE_SQL
from core.tools import ToolContext, ToolRegistry
from tests.conftest import RecordingSender
from tests.support.scripted_model import ScriptedModel, calls, text

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # 10:00 in Paris
PARIS = "Europe/Paris"
FULL = (
    "You have 2 reminders waiting, and one person may have at most 2: "
    "cancel one before setting another."
)
EVERY_MINUTE = (
    "A repeating reminder may fire at most once every 5 minutes, and this one would "
    "fire 1 minute apart: choose a longer interval."
)


def chat(key: str) -> tuple[str, str, str]:
    """(session key, platform, chat id) of a session key."""
    parts = key.split(":")
    return key, parts[2], parts[-1]


PRIVATE = "agent:main:telegram:private:42"
GROUP = "agent:main:telegram:group:-100"
HELPER = "agent:helper:telegram:private:42"
ON_DISCORD = "agent:main:discord:private:42"


def config(active: int | None = 2, interval: str = "5m") -> KeptConfig:
    return KeptConfig(
        limits=LimitsConfig(per_user=PerUserLimits(active_reminders=active)),
        reminders=RemindersConfig(min_interval=interval),
    )


@dataclass
class World:
    backend: Backend
    clock: TestClock
    service: ReminderService
    tools: ToolRegistry
    # The live config, read at each creation: a test replaces it, as a reload does.
    live: list[KeptConfig]

    def configure(self, active: int | None = 2, interval: str = "5m") -> None:
        self.live[0] = config(active, interval)

    def ctx(self, key: str = PRIVATE, sender: str = "u42") -> ToolContext:
        _, platform, chat_id = chat(key)
        return ToolContext(
            agent_id=key.split(":")[1],
            session_key=key,
            target=Target(platform, chat_id),
            chat_kind="group" if ":group:" in key else "private",
            sender_id=sender,
            now=self.clock.now(),
        )

    async def call(self, args: dict[str, Any], **where: str) -> dict[str, Any]:
        out = await self.tools.call("schedule_reminder", json.dumps(args), self.ctx(**where))
        return dict(json.loads(out))

    async def active(self) -> int:
        return len(await self.backend.reminders.list_all(statuses=("active",)))


@pytest.fixture
async def world(storage_url: str) -> AsyncIterator[World]:
    clock = TestClock()
    clock.set(NOW)
    async with open_backend(storage_url) as backend:
        for key in (PRIVATE, GROUP, HELPER, ON_DISCORD):
            _, platform, chat_id = chat(key)
            await backend.store.ensure_session(
                key,
                agent_id=key.split(":")[1],
                platform=platform,
                chat_id=chat_id,
                chat_kind="group" if ":group:" in key else "private",
                thread_id=None,
                now=NOW,
            )
        live = [config()]
        service = ReminderService(
            backend.reminders, clock, limits=lambda: ReminderLimits.of(live[0])
        )
        tools = ToolRegistry()
        register_reminder_tools(
            tools, service, refusal=reminder_refused, default_timezone=lambda _agent: PARIS
        )
        yield World(backend, clock, service, tools, live)


def new(key: str = PRIVATE, created_by: str | None = "u42") -> NewReminder:
    _, platform, chat_id = chat(key)
    return NewReminder(
        agent_id=key.split(":")[1],
        session_key=key,
        target=Target(platform, chat_id),
        created_by=created_by,
        text="stretch",
        kind="after",
        cron=None,
        timezone=PARIS,
        next_fire_at=NOW + timedelta(hours=1),
        created_at=NOW,
    )


# --- the store: the count per platform user ---------------------------------------


async def test_the_count_is_per_platform_user_across_chats_and_agents(world: World) -> None:
    rs = world.backend.reminders
    await rs.add(new(PRIVATE), max_active=3)
    await rs.add(new(GROUP), max_active=3)
    await rs.add(new(HELPER), max_active=3)
    with pytest.raises(TooManyReminders) as refused:
        await rs.add(new(PRIVATE), max_active=3)
    assert (refused.value.limit, refused.value.active) == (3, 3)
    assert await world.active() == 3
    # Someone else in the same group, and the same id on another platform,
    # are other users: each has room of their own.
    other = await rs.add(new(GROUP, created_by="u7"), max_active=3)
    elsewhere = await rs.add(new(ON_DISCORD), max_active=3)
    assert (other.created_by, elsewhere.platform) == ("u7", "discord")
    # Without a limit nothing is counted.
    await rs.add(new(PRIVATE), max_active=None)
    assert await world.active() == 6


async def test_only_active_reminders_count(world: World) -> None:
    rs = world.backend.reminders
    first = await rs.add(new(), max_active=2)
    second = await rs.add(new(), max_active=2)
    with pytest.raises(TooManyReminders):
        await rs.add(new(), max_active=2)
    # A cancelled one and a fired one free their place.
    assert await rs.cancel(first.id, now=NOW) is not None
    third = await rs.add(new(), max_active=2)
    assert await rs.mark_fired(second.id, now=NOW, next_fire_at=None) is not None
    fourth = await rs.add(new(), max_active=2)
    assert {third.status, fourth.status} == {"active"}
    with pytest.raises(TooManyReminders):
        await rs.add(new(), max_active=2)


async def test_a_reminder_with_no_known_creator_is_not_counted(world: World) -> None:
    rs = world.backend.reminders
    for _ in range(3):
        await rs.add(new(created_by=None), max_active=1)
    assert await world.active() == 3
    # Positive control: a named creator is held to the same bound.
    await rs.add(new(), max_active=1)
    with pytest.raises(TooManyReminders):
        await rs.add(new(), max_active=1)


async def test_the_count_reads_the_creators_index(world: World) -> None:
    async def plan(tx: Transaction) -> str:
        if tx.dialect.name == "postgres":
            # A few rows make a scan the cheaper plan; the index must exist and serve.
            await tx.execute("SET LOCAL enable_seqscan = off")
            rows = await tx.fetchall("EXPLAIN " + COUNT_ACTIVE_SQL, ("telegram", "u42"))
            return " | ".join(str(r[0]) for r in rows)
        rows = await tx.fetchall("EXPLAIN QUERY PLAN " + COUNT_ACTIVE_SQL, ("telegram", "u42"))
        return " | ".join(str(r[3]) for r in rows)

    assert "reminders_creator" in await world.backend.database.snapshot(plan)


# --- the tool: the refusal lines ---------------------------------------------------


async def test_the_tool_refuses_one_more_than_the_limit_with_one_line(world: World) -> None:
    assert (await world.call({"text": "a", "after": "1h"}))["scheduled"] is True
    assert (await world.call({"text": "b", "cron": "0 9 * * *"}, key=GROUP))["scheduled"]
    out = await world.call({"text": "c", "after": "2h"}, key=HELPER)
    assert out == {"error": FULL}
    assert await world.active() == 2
    # Another member of the group still can.
    assert (await world.call({"text": "d", "after": "1h"}, key=GROUP, sender="u7"))["scheduled"]


async def test_the_limit_is_read_from_the_live_config_at_each_creation(world: World) -> None:
    for words in ("a", "b"):
        assert (await world.call({"text": words, "after": "1h"}))["scheduled"]
    assert "error" in await world.call({"text": "c", "after": "1h"})
    world.configure(active=3)
    assert (await world.call({"text": "c", "after": "1h"}))["scheduled"]
    world.configure(active=None)
    assert (await world.call({"text": "d", "after": "1h"}))["scheduled"]
    # Lowered below what the user has: nothing is cancelled, nothing added.
    world.configure(active=1)
    out = await world.call({"text": "e", "after": "1h"})
    assert out["error"] == (
        "You have 4 reminders waiting, and one person may have at most 1: "
        "cancel 4 before setting another."
    )
    assert await world.active() == 4


async def test_a_cron_every_minute_is_refused_naming_the_minimum(world: World) -> None:
    out = await world.call({"text": "spam", "cron": "* * * * *"})
    assert out == {"error": EVERY_MINUTE}
    assert await world.active() == 0
    # Positive control: exactly the minimum is allowed.
    assert (await world.call({"text": "ok", "cron": "*/5 * * * *"}))["scheduled"]
    assert await world.active() == 1


async def test_a_short_gap_after_a_long_first_one_is_refused(world: World) -> None:
    # At 10:00:30 in Paris the next firings are 10:01, then 10:00 and 10:01
    # tomorrow: the first gap is almost a day, the second a minute.
    world.clock.set(NOW + timedelta(seconds=30))
    out = await world.call({"text": "twice", "cron": "0,1 10 * * *"})
    assert out == {"error": EVERY_MINUTE}
    # Positive control: the same hour, far enough apart.
    assert (await world.call({"text": "twice", "cron": "0,30 10 * * *"}))["scheduled"]


async def test_the_minimum_interval_is_read_live(world: World) -> None:
    assert (await world.call({"text": "a", "cron": "*/5 * * * *"}))["scheduled"]
    world.configure(interval="1h")
    out = await world.call({"text": "b", "cron": "*/30 * * * *"})
    assert out["error"] == (
        "A repeating reminder may fire at most once every 1 hour, and this one would "
        "fire 30 minutes apart: choose a longer interval."
    )
    world.configure(interval="1m")
    assert (await world.call({"text": "c", "cron": "* * * * *"}))["scheduled"]


async def test_one_shot_reminders_have_no_interval(world: World) -> None:
    world.configure(active=None, interval="1d")
    assert (await world.call({"text": "soon", "after": "1m"}))["scheduled"]
    assert (await world.call({"text": "daily", "cron": "0 9 * * *"}))["scheduled"]
    assert "error" in await world.call({"text": "hourly", "cron": "0 * * * *"})


async def test_the_service_raises_a_typed_refusal(world: World) -> None:
    schedule = parse_schedule(
        at=None, after=None, cron="*/2 * * * *", timezone=PARIS, now=world.clock.now()
    )
    with pytest.raises(RepeatsTooOften) as refused:
        await world.service.schedule(
            agent_id="main",
            session_key=PRIVATE,
            target=Target("telegram", "42"),
            created_by="u42",
            text="x",
            schedule=schedule,
        )
    assert (refused.value.minimum, refused.value.gap) == (
        timedelta(minutes=5),
        timedelta(minutes=2),
    )
    assert reminder_refused(refused.value) == (
        "A repeating reminder may fire at most once every 5 minutes, and this one would "
        "fire 2 minutes apart: choose a longer interval."
    )


async def test_a_chat_turn_relays_the_refusal(world: World) -> None:
    """Through a whole turn: the model asks for a cron every minute, reads
    the one line as the tool's result, and the user gets it."""
    model = ScriptedModel()
    sender = RecordingSender()
    manager = ConversationManager(
        store=world.backend.store, llm=model, sender=sender, config=lambda: world.live[0],
        clock=world.clock, tools=world.tools,
    )  # fmt: skip

    async def relay(messages, tools):  # type: ignore[no-untyped-def]
        return text(json.loads(messages[-1]["content"])["error"])

    arguments = json.dumps({"text": "drink water", "cron": "* * * * *"})
    model.steps = [calls(ToolCall("c1", "schedule_reminder", arguments)), relay]
    await manager.handle(
        Inbound(
            agent_id="main", target=Target("telegram", "42"), chat_kind="private",
            sender_id="u42", text="remind me every minute to drink water", ts=world.clock.now(),
        )
    )  # fmt: skip
    _, prompt, _ = model.requests[-1]
    assert prompt[-1]["role"] == "tool" and json.loads(prompt[-1]["content"]) == {
        "error": EVERY_MINUTE
    }
    assert [o.text for o in sender.sent] == [EVERY_MINUTE]
    assert await world.active() == 0


# --- the gap itself (no store) ----------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "gap"),
    [
        ("* * * * *", timedelta(minutes=1)),
        ("*/4 * * * *", timedelta(minutes=4)),
        ("0,3 9 * * *", timedelta(minutes=3)),
        # The step over an hour: 09:58 then 10:00.
        ("58 9,10 * * *", None),
        ("0,58 9,10 * * *", timedelta(minutes=2)),
        # The step over midnight: 23:58, then 00:00 the next day.
        ("0,58 0,23 * * *", timedelta(minutes=2)),
        ("*/5 * * * *", None),
        ("0 9 * * 1-5", None),
        ("@hourly", None),
    ],
)
def test_the_shortest_gap(expr: str, gap: timedelta | None) -> None:
    assert shortest_cron_gap(expr, PARIS, NOW, timedelta(minutes=5)) == gap


def test_the_gap_times_of_a_spring_forward_collapse_into_one_firing() -> None:
    # 02:00-02:59 does not exist on 2026-03-29 in Paris: every 5 minutes of
    # it fires once, at 03:00, never twice in a row.
    before = datetime(2026, 3, 29, 0, 50, tzinfo=UTC)  # 01:50 in Paris
    firings = cron_firings("*/5 * * * *", PARIS, before, 4)
    assert [f.astimezone(UTC).strftime("%H:%M") for f in firings] == [
        "00:55",
        "01:00",
        "01:05",
        "01:10",
    ]
    assert shortest_cron_gap("*/5 * * * *", PARIS, before, timedelta(minutes=5)) is None


def test_the_lengths_are_said_in_words() -> None:
    refusal = RepeatsTooOften(timedelta(minutes=90), timedelta(seconds=90))
    assert reminder_refused(refusal) == (
        "A repeating reminder may fire at most once every 1 hour 30 minutes, and this one "
        "would fire 1 minute 30 seconds apart: choose a longer interval."
    )
    assert reminder_refused(TooManyReminders(1, 1)) == (
        "You have 1 reminder waiting, and one person may have at most 1: "
        "cancel one before setting another."
    )
