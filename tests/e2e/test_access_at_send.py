"""Access is checked when something is sent, end to end on the fake Bot API
with the real client library: an approved user whose pairing is revoked gets
neither their due reminder nor their due follow-up; approved again, the
follow-up (still pending) arrives within its window, the reminder's skipped
firing does not come back; a group taken out of `groups` gets nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.config import KeptConfig
from core.llm import Completion
from core.messages import Target
from core.reminders import parse_schedule
from tests.fakes.scripted_model import text
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

USER, GROUP = 42, -100500
SETTINGS: dict[str, Any] = {"dmPolicy": "pairing", "groupPolicy": "allowlist"}


async def check_in(messages: list[dict[str, Any]], tools: Any) -> Completion:
    prompt = json.dumps(messages)
    return text("Hi! Did the parcel arrive?" if "parcel" in prompt else "Hi! How did it go?")


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(
        tmp_path, {**SETTINGS, "groups": [GROUP]}, commitments={"enabled": True}
    ) as harness:
        yield harness


def without_group(tg: TelegramHarness) -> KeptConfig:
    """The config after the operator took the group out of `groups`."""
    doc = tg.config.model_dump(by_alias=True, exclude_none=True)
    doc["channels"]["telegram"]["groups"] = []
    return KeptConfig.model_validate(doc)


async def approve(tg: TelegramHarness) -> None:
    offer = await tg.services.pairing.offer("telegram", str(USER), "ana")
    assert offer is not None
    assert await tg.services.pairing.approve(offer.request.code) is not None


async def test_revoked_user_and_removed_group_get_nothing_until_let_in_again(
    tg: TelegramHarness,
) -> None:
    await approve(tg)
    private = await tg.seed(scope(USER), "How did the interview go?")
    in_group = await tg.seed(scope(GROUP, sender=USER), "Did the parcel arrive?")
    reminders = tg.services.reminders
    due = parse_schedule(at=None, after="1m", cron=None, timezone="UTC", now=tg.clock.now())
    reminder = await reminders.schedule(
        agent_id="main",
        session_key=f"agent:main:telegram:private:{USER}",
        target=Target("telegram", str(USER)),
        created_by=str(USER),
        text="take my meds",
        schedule=due,
    )
    assert await tg.services.pairing.revoke("telegram", str(USER))  # kept pairing revoke
    tg.config = without_group(tg)  # a reload without the group
    await tg.start()
    tg.model.steps.extend([check_in, check_in, check_in])

    for _ in range(3):
        await tg.clock.advance(60)
        await tg.services.heartbeat.tick()
    assert tg.fake.sent == [] and tg.model.requests == []
    assert (await tg.commitment(private.id)).status == "pending"
    assert (await tg.commitment(in_group.id)).status == "pending"
    skipped = await reminders.store.get(reminder.id)
    assert skipped is not None and skipped.status == "failed"

    await approve(tg)  # approved again, within the follow-up's window
    for _ in range(2):
        await tg.clock.advance(61)
        await tg.services.heartbeat.tick()
    assert [(s.chat_id, s.text) for s in tg.fake.sent] == [(USER, "Hi! How did it go?")]
    assert (await tg.commitment(private.id)).status == "sent"
    assert (await tg.commitment(in_group.id)).status == "pending"
