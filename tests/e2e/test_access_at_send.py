"""Access is checked when something is sent, end to end on the fake Bot API
with the real client library: an approved user whose pairing is revoked (the
real `kept pairing revoke` in a subprocess, on the same database) gets
neither their due reminder nor their due follow-up; approved again, the
follow-up (still pending) arrives within its window, the reminder's skipped
firing does not come back; a group (Telegram) or server (Discord) taken out
of `groups` gets nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from core.commitments.model import NewCommitment, Scope
from core.config.model import KeptConfig
from core.llm import Completion
from core.messages import Target
from core.reminders import parse_schedule
from tests.e2e.test_pairing import kept
from tests.support.discord_harness import discord_harness
from tests.support.scripted_model import text
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
    tg: TelegramHarness, tmp_path: Path
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
    status, _, err = await kept(tmp_path, "pairing", "revoke", f"telegram:{USER}")
    assert status == 0, err
    tg.config = without_group(tg)  # a reload without the group
    await tg.start()
    tg.model.steps.extend([check_in, check_in, check_in])

    for _ in range(3):
        await tg.clock.advance(60)
        await tg.services.scheduler.tick()
    assert tg.fake.sent == [] and tg.model.requests == []
    assert (await tg.commitment(private.id)).status == "pending"
    assert (await tg.commitment(in_group.id)).status == "pending"
    skipped = await reminders.store.get(reminder.id)
    assert skipped is not None and skipped.status == "failed"

    await approve(tg)  # approved again, within the follow-up's window
    for _ in range(2):
        await tg.clock.advance(61)
        await tg.services.scheduler.tick()
    assert [(s.chat_id, s.text) for s in tg.fake.sent] == [(USER, "Hi! How did it go?")]
    assert (await tg.commitment(private.id)).status == "sent"
    assert (await tg.commitment(in_group.id)).status == "pending"


async def test_a_discord_server_removed_from_groups_gets_no_check_in(tmp_path: Path) -> None:
    # `groups` lists servers: the channel's server is found through the client.
    async with discord_harness(tmp_path, groupPolicy="allowlist") as harness:
        fake = harness.fake
        settings = harness.config.channels.discord
        settings.groups = [str(fake.guild_id)]
        harness.config.commitments.enabled = True
        await harness.start()
        key = f"agent:main:discord:channel:{fake.general}"
        await harness.store.ensure_session(
            key, agent_id="main", platform="discord", chat_id=str(fake.general),
            chat_kind="channel", thread_id=None, now=harness.clock.now(),
        )  # fmt: skip
        member = Scope(
            "main", key, "discord", str(fake.general), None, str(fake.ana["id"]),
            chat_kind="channel",
        )  # fmt: skip
        now = harness.clock.now()
        new = NewCommitment(
            scope=member, kind="event_check_in", sensitivity="routine",
            source="inferred_user_context", reason="user has a job interview",
            suggested_text="How did the interview go?", dedupe_key="interview",
            confidence=0.9, due_earliest=now, due_latest=now + timedelta(hours=36),
            due_timezone="UTC", source_message_id=None, created_at=now,
        )  # fmt: skip
        store = harness.services.backend.commitments
        [created] = (await store.apply_extraction(member, [new], [], now=now)).created
        settings.groups = ["123456789012345678"]  # another server only
        harness.model.steps.append(text("How did the interview go?"))
        await harness.services.scheduler.tick()
        assert fake.sent == [] and harness.model.requests == []
        found = await store.get(created.id)
        assert found is not None and found.status == "pending"

        settings.groups = [str(fake.guild_id)]  # listed again
        await harness.clock.advance(61)
        await harness.services.scheduler.tick()
        await fake.wait_for(lambda: fake.sent)
        assert [(s.channel_id, s.content) for s in fake.sent] == [
            (fake.general, "How did the interview go?")
        ]
