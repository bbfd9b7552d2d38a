"""The chat model's reminder tools in a Telegram group, end to end through
the fake Bot API on real services: a member lists and cancels only their own
reminders; a chat administrator (getChatMember, asked only then) sees and
cancels every member's. The sender and the admin answer come from the stored
message and the platform, never from the model's arguments."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.llm import ToolCall
from core.messages import Target
from core.reminders import parse_schedule
from core.reminders.model import Reminder
from tests.support.scripted_model import calls, text
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

GROUP = -100900
ALICE, BOB, CAROL = 11, 12, 13


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


async def remind(tg: TelegramHarness, member: int, body: str) -> Reminder:
    schedule = parse_schedule(at=None, after="2h", cron=None, timezone="UTC", now=tg.clock.now())
    return await tg.services.reminders.schedule(
        agent_id="main",
        session_key=scope(GROUP).session_key,
        target=Target("telegram", str(GROUP)),
        created_by=str(member),
        text=body,
        schedule=schedule,
    )


async def tool_turn(tg: TelegramHarness, member: int, call: ToolCall) -> dict[str, Any]:
    """`member` mentions the bot; the model calls `call` and answers with
    what the tool returned, which is returned here."""
    seen: list[dict[str, Any]] = []

    async def answer(messages: list[dict[str, Any]], tools: object) -> Any:
        seen.append(json.loads(messages[-1]["content"]))
        return text("done")

    tg.model.steps += [calls(call), answer]
    before = len(tg.fake.sent)
    await tg.fake.push_message(
        "@kept_bot my reminders?", chat_id=GROUP, user_id=member, chat_type="supergroup"
    )
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    assert seen, "the model never saw the tool's answer"
    return seen[0]


def listing() -> ToolCall:
    return ToolCall(id="c_list", name="list_reminders", arguments="{}")


def cancelling(reminder_id: str) -> ToolCall:
    return ToolCall(
        id="c_cancel", name="cancel_reminder", arguments=json.dumps({"id": reminder_id})
    )


async def test_a_member_lists_and_cancels_only_their_own(tg: TelegramHarness) -> None:
    meds = await remind(tg, ALICE, "take my meds")
    call_mum = await remind(tg, BOB, "call mum")
    await tg.start()

    listed = await tool_turn(tg, BOB, listing())
    assert [r["id"] for r in listed["reminders"]] == [call_mum.id]
    assert "take my meds" not in json.dumps(listed)

    refused = await tool_turn(tg, BOB, cancelling(meds.id))
    assert "no reminder" in refused["error"]
    still = await tg.services.reminders.store.get(meds.id)
    assert still is not None and still.status == "active"
    # Positive control: Bob's own is cancelled through the same tool.
    own = await tool_turn(tg, BOB, cancelling(call_mum.id))
    assert own["cancelled"] is True


async def test_a_chat_admin_sees_and_cancels_every_members(tg: TelegramHarness) -> None:
    tg.fake.members[(GROUP, CAROL)] = "administrator"
    meds = await remind(tg, ALICE, "take my meds")
    call_mum = await remind(tg, BOB, "call mum")
    await tg.start()

    listed = await tool_turn(tg, CAROL, listing())
    assert {r["id"] for r in listed["reminders"]} == {meds.id, call_mum.id}
    asked = [c.params for c in tg.fake.calls_to("getChatMember")]
    assert [(int(p["chat_id"]), int(p["user_id"])) for p in asked] == [(GROUP, CAROL)]

    cancelled = await tool_turn(tg, CAROL, cancelling(meds.id))
    assert cancelled["cancelled"] is True
    gone = await tg.services.reminders.store.get(meds.id)
    assert gone is not None and gone.status == "cancelled"
