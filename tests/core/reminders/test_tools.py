"""The reminder tools through the real ToolRegistry, as the chat model calls them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from core.clock import TestClock
from core.commands.wording import reminder_refused
from core.messages import Target
from core.reminders import ReminderService, register_reminder_tools
from core.store import Store
from core.tools import ToolContext, ToolRegistry
from tests.support.store_helpers import make_reminder_store

PARIS = "Europe/Paris"
HERE = ToolContext(
    agent_id="main",
    session_key="agent:main:telegram:private:42",
    target=Target("telegram", "42"),
    chat_kind="private",
    sender_id="u42",
    now=datetime(2026, 11, 30, 9, 0, tzinfo=UTC),
)
ELSEWHERE = ToolContext(
    agent_id="main",
    session_key="agent:main:discord:channel:7:thread:8",
    target=Target("discord", "7", "8"),
    chat_kind="channel",
    sender_id="u9",
    now=HERE.now,
)


class Tools:
    def __init__(self, store: Store, clock: TestClock) -> None:
        self.wakes = 0
        self.service = ReminderService(make_reminder_store(store), clock, on_stored=self._wake)
        self.registry = ToolRegistry()
        register_reminder_tools(
            self.registry,
            self.service,
            refusal=reminder_refused,
            default_timezone=lambda agent: {"main": PARIS}[agent],
        )

    def _wake(self) -> None:
        self.wakes += 1

    async def call(self, name: str, args: dict[str, Any], ctx: ToolContext = HERE) -> Any:
        return json.loads(await self.registry.call(name, json.dumps(args), ctx))


@pytest.fixture
async def tools(any_store: Store, clock: TestClock) -> Tools:
    clock.set(HERE.now)  # 10:00 in Paris
    return Tools(any_store, clock)


def test_the_three_tools_are_registered(tools: Tools) -> None:
    assert tools.registry.names() == ["schedule_reminder", "list_reminders", "cancel_reminder"]
    spec = tools.registry.specs()[0]["function"]
    # Nothing in the schema lets the model name a destination.
    assert set(spec["parameters"]["properties"]) == {"text", "at", "after", "cron", "timezone"}


async def test_schedule_at_a_time_of_day_answers_in_the_user_timezone(tools: Tools) -> None:
    out = await tools.call("schedule_reminder", {"text": "call the dentist", "at": "15:00"})
    assert out["scheduled"] is True and out["id"].startswith("rm_")
    assert (out["next_fire_at"], out["timezone"], out["repeats"]) == (
        "2026-11-30T15:00+01:00",
        PARIS,
        "no",
    )
    assert tools.wakes == 1


async def test_schedule_after_and_cron(tools: Tools) -> None:
    out = await tools.call("schedule_reminder", {"text": "tea", "after": "20m"})
    assert out["next_fire_at"] == "2026-11-30T10:20+01:00"
    out = await tools.call(
        "schedule_reminder",
        {"text": "standup", "cron": "0 9 * * 1-5", "timezone": "America/New_York"},
    )
    # 2026-11-30 is a Monday; 09:00 in New York is 14:00 UTC.
    assert (out["next_fire_at"], out["repeats"]) == ("2026-11-30T09:00-05:00", "0 9 * * 1-5")


async def test_the_destination_comes_from_the_calling_chat_only(tools: Tools) -> None:
    args = {"text": "send this to chat 77", "after": "1m", "chat_id": "77", "platform": "discord"}
    out = await tools.call("schedule_reminder", args)
    stored = await tools.service.store.get(out["id"])
    assert stored is not None
    assert (stored.target, stored.session_key, stored.created_by) == (
        HERE.target,
        HERE.session_key,
        "u42",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"at": "15:00"}, "'text' is required"),
        ({"text": "   ", "at": "15:00"}, "'text' is required"),
        ({"text": "x" * 1001, "at": "15:00"}, "too long"),
        ({"text": 5, "at": "15:00"}, "'text' must be a string"),
        ({"text": "tea"}, "exactly one of 'at', 'after' or 'cron'"),
        ({"text": "tea", "at": "15:00", "after": "2h"}, "exactly one"),
        ({"text": "tea", "after": "soonish"}, "duration"),
        ({"text": "tea", "at": "2020-01-01T09:00"}, "in the past"),
        ({"text": "tea", "at": "2026-12-24"}, "needs a time"),
        ({"text": "tea", "cron": "0 9 * *"}, "5 fields"),
        ({"text": "tea", "cron": "0 9 31 2 *"}, "never fires"),
        ({"text": "tea", "after": "1h", "timezone": "Paris"}, "unknown time zone"),
    ],
)
async def test_bad_inputs_come_back_as_tool_errors(
    tools: Tools, args: dict[str, Any], message: str
) -> None:
    out = await tools.call("schedule_reminder", args)
    assert message in out["error"]
    assert await tools.service.store.list_all() == []
    assert tools.wakes == 0


async def test_list_and_cancel_are_scoped_to_the_calling_chat(tools: Tools) -> None:
    mine = await tools.call("schedule_reminder", {"text": "mine", "after": "1h"})
    theirs = await tools.call("schedule_reminder", {"text": "theirs", "after": "2h"}, ctx=ELSEWHERE)
    listed = await tools.call("list_reminders", {})
    assert [r["id"] for r in listed["reminders"]] == [mine["id"]]
    assert (listed["now"], listed["timezone"]) == ("2026-11-30T10:00+01:00", PARIS)

    out = await tools.call("cancel_reminder", {"id": theirs["id"]})
    assert "no reminder" in out["error"] and "in this chat" in out["error"]
    still = await tools.service.store.get(theirs["id"])
    assert still is not None and still.status == "active"

    assert (await tools.call("cancel_reminder", {"id": mine["id"]}))["cancelled"] is True
    again = await tools.call("cancel_reminder", {"id": mine["id"]})
    assert "already cancelled" in again["error"]
    assert (await tools.call("list_reminders", {}))["reminders"] == []
    assert "'id' is required" in (await tools.call("cancel_reminder", {}))["error"]


async def test_an_unknown_agent_falls_back_to_utc(tools: Tools) -> None:
    ctx = ToolContext(
        agent_id="ghost",
        session_key="agent:ghost:telegram:private:1",
        target=Target("telegram", "1"),
        chat_kind="private",
        sender_id=None,
        now=HERE.now,
    )
    out = await tools.call("schedule_reminder", {"text": "tea", "at": "15:00"}, ctx=ctx)
    assert (out["next_fire_at"], out["timezone"]) == ("2026-11-30T15:00+00:00", "UTC")


def _member(user: str, *, admin: bool = False) -> ToolContext:
    async def is_admin() -> bool:
        return admin

    return ToolContext(
        agent_id="main",
        session_key="agent:main:telegram:group:-100",
        target=Target("telegram", "-100"),
        chat_kind="group",
        sender_id=user,
        now=HERE.now,
        is_admin=is_admin,
    )


async def test_in_a_group_a_member_lists_and_cancels_only_their_own(tools: Tools) -> None:
    alice, bob = _member("alice"), _member("bob")
    meds = await tools.call("schedule_reminder", {"text": "take my meds", "after": "1h"}, alice)
    own = await tools.call("schedule_reminder", {"text": "call mum", "after": "2h"}, bob)

    listed = await tools.call("list_reminders", {}, bob)
    assert [r["id"] for r in listed["reminders"]] == [own["id"]]

    out = await tools.call("cancel_reminder", {"id": meds["id"]}, bob)
    assert "no reminder" in out["error"]
    still = await tools.service.store.get(meds["id"])
    assert still is not None and still.status == "active"

    admin = _member("carol", admin=True)
    every = await tools.call("list_reminders", {}, admin)
    assert {r["id"] for r in every["reminders"]} == {meds["id"], own["id"]}
    assert (await tools.call("cancel_reminder", {"id": meds["id"]}, admin))["cancelled"] is True
