"""`/followups [on|off]` on Telegram, end to end through the fake Bot API on
real services: in a private chat the user's own; in a group an
administrator's switches the whole group, a member's only themselves (the
answer says which)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.users.followup_prefs import DISMISSED_REASON
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

GROUP = -100700
IN_GROUP = {"chat_id": GROUP, "chat_type": "supergroup"}


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


async def command(tg: TelegramHarness, text: str, **where: object) -> str:
    before = len(tg.fake.sent)
    await tg.fake.push_message(text, **where)  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    return tg.fake.sent[before].text


async def own(tg: TelegramHarness, user: int) -> bool | None:
    return (await tg.services.followup_prefs.state("main", "telegram", str(user))).own


async def group_switch(tg: TelegramHarness) -> bool | None:
    key = scope(GROUP).session_key
    return (await tg.services.followup_prefs.state("main", "telegram", "1", key)).chat


async def test_in_a_private_chat_it_shows_and_switches_the_users_own(tg: TelegramHarness) -> None:
    pending = await tg.seed(scope(42), "How did the interview go?")
    await tg.start()
    assert (await command(tg, "/followups", chat_id=42)).startswith("Your follow-ups are on")
    answer = await command(tg, "/followups off", chat_id=42)
    assert answer.startswith("Your follow-ups are now off, in every chat with me")
    assert "I dismissed 1 pending follow-up." in answer and "Reminders still come." in answer
    assert await own(tg, 42) is False and await own(tg, 43) is None
    dismissed = await tg.commitment(pending.id)
    assert (dismissed.status, dismissed.last_error) == ("dismissed", DISMISSED_REASON)
    assert (await command(tg, "/followups", chat_id=42)).startswith("Your follow-ups are off")
    assert (await command(tg, "/followups on", chat_id=42)).startswith("Your follow-ups are now on")
    assert await own(tg, 42) is True
    assert tg.model.requests == []  # a command is no turn


async def test_a_word_other_than_on_or_off_is_the_usage(tg: TelegramHarness) -> None:
    await tg.start()
    assert await command(tg, "/followups maybe", chat_id=42) == "Usage: /followups [on|off]"
    assert await own(tg, 42) is None


async def test_in_a_group_an_admin_switches_the_group_a_member_themselves(
    tg: TelegramHarness,
) -> None:
    admin, member, other = 8, 9, 10
    tg.fake.members[(GROUP, admin)] = "administrator"
    members = await tg.seed(scope(GROUP, sender=other), "How was the match?")
    await tg.start()

    mine = await command(tg, "/followups off", **IN_GROUP, user_id=member)
    assert mine.startswith("Your follow-ups are now off (just yours")
    assert await own(tg, member) is False and await group_switch(tg) is None
    assert (await tg.commitment(members.id)).status == "pending"  # another member's

    theirs = await command(tg, "/followups off", **IN_GROUP, user_id=admin)
    assert theirs.startswith("Follow-ups are now off for everyone in this chat (you are an admin)")
    assert "I dismissed 1 pending follow-up." in theirs
    assert await group_switch(tg) is False and await own(tg, admin) is None
    assert (await tg.commitment(members.id)).status == "dismissed"

    shown = await command(tg, "/followups", **IN_GROUP, user_id=other)
    assert shown.startswith("Follow-ups are off in this chat: an admin switched them off")
    # A member's own "on" cannot override the group's.
    back = await command(tg, "/followups on", **IN_GROUP, user_id=member)
    assert "an admin switched them off for this chat, so none come here" in back
    assert await own(tg, member) is True and await group_switch(tg) is False
    assert "Follow-ups are now on for everyone in this chat" in await command(
        tg, "/followups on", **IN_GROUP, user_id=admin
    )
    assert await group_switch(tg) is True


async def test_followups_is_in_the_help_and_the_command_menu(tg: TelegramHarness) -> None:
    await tg.start()
    assert "/followups" in await command(tg, "/help", chat_id=42)
    menu = tg.fake.calls_to("setMyCommands")[-1].params["commands"]
    names = [c["command"] for c in (json.loads(menu) if isinstance(menu, str) else menu)]
    assert "followups" in names


async def test_after_followups_off_their_messages_reach_no_extraction_call(
    tg: TelegramHarness,
) -> None:
    """As `kept run` composes it (bot/services.py): the switch a command set
    is the one extraction reads."""
    tg.services.extraction.start()
    try:
        await tg.start()
        await command(tg, "/followups off", chat_id=42)
        await command(tg, "my giraffe interview is tomorrow", chat_id=43)  # positive control
        await command(tg, "my okapi interview is tomorrow", chat_id=42)
        await tg.clock.advance(30)  # past the extraction's batch window
        await asyncio.wait_for(tg.services.extraction.wait_idle(), 5)
        extracted = [
            str(messages) for role, messages, _ in tg.model.requests if role == "extraction"
        ]
        assert len(extracted) == 1 and "giraffe" in extracted[0]
        assert not any("okapi" in e for e in extracted)
        chats = [str(messages) for role, messages, _ in tg.model.requests if role == "chat"]
        assert any("okapi" in c for c in chats)  # they are still answered
    finally:
        await tg.services.extraction.stop(drain_seconds=0.1)


async def test_mydata_shows_the_users_own_switch(tg: TelegramHarness) -> None:
    await tg.start()
    assert "follow-ups: on (/followups off stops them)" in await command(tg, "/mydata", chat_id=42)
    await command(tg, "/followups off", chat_id=42)
    assert "follow-ups: off (/followups on switches them back on)" in await command(
        tg, "/mydata", chat_id=42
    )
