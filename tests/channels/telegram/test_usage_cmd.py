"""`/usage` on Telegram, end to end through the fake Bot API on real
services, on both backends: the sender's own UTC day (calls, tokens in and
out, estimated calls) and, with `limits.perUser.tokensPerDay`, what is left
and when it starts again; in a group only the sender's own; never a turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.telegram_harness import TelegramHarness, telegram_harness
from tests.support.usage_rows import record_call

GROUP = -100700
IN_GROUP = {"chat_id": GROUP, "chat_type": "supergroup"}
CAP = {"limits": {"perUser": {"tokensPerDay": 10_000}}}


@pytest.fixture
async def tg(tmp_path: Path, storage_url: str) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path, storage_url=storage_url, **CAP) as harness:
        yield harness


async def command(tg: TelegramHarness, text: str, **where: object) -> str:
    before = len(tg.fake.sent)
    await tg.fake.push_message(text, **where)  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    return tg.fake.sent[before].text


async def seed(tg: TelegramHarness) -> None:
    backend, now = tg.services.backend, tg.clock.now()  # 09:00 UTC
    await record_call(backend, "telegram", "42", 1200, 300, now - timedelta(hours=1))
    await record_call(backend, "telegram", "42", 400, 100, now, estimated=True)
    # Another member, in the group: never in 42's answer.
    await record_call(backend, "telegram", "9", 5000, 5000, now, chat=str(GROUP))
    # Yesterday's (UTC): another day's allowance.
    await record_call(backend, "telegram", "42", 7777, 7777, now - timedelta(hours=10))


async def test_a_user_sees_their_own_day_and_what_is_left(tg: TelegramHarness) -> None:
    await tg.start()
    before = await command(tg, "/usage", chat_id=42)
    assert before.startswith("Your use of the model today (the UTC day 2026-11-30): 0 calls")
    assert "10,000 tokens, 10,000 left" in before
    await seed(tg)
    answer = await command(tg, "/usage", chat_id=42)
    assert answer.splitlines() == [
        "Your use of the model today (the UTC day 2026-11-30): 2 calls, 1,600 tokens in, "
        "400 tokens out.",
        "(1 call estimated from their length: the model did not say.)",
        "Your daily allowance: 10,000 tokens, 8,000 left. It resets at 00:00 UTC, in 15 h.",
    ]
    assert tg.model.requests == []  # a command is no turn


async def test_a_spent_allowance_says_when_it_starts_again(tg: TelegramHarness) -> None:
    await tg.start()
    await record_call(tg.services.backend, "telegram", "42", 9000, 2000, tg.clock.now())
    await tg.clock.advance(14 * 3600 + 30 * 60)  # 23:30 UTC
    answer = await command(tg, "/usage", chat_id=42)
    assert "Your daily allowance of 10,000 tokens is used up" in answer
    assert "it resets at 00:00 UTC, in 30 minutes" in answer
    await tg.clock.advance(3600)  # a new UTC day
    assert "10,000 tokens, 10,000 left" in await command(tg, "/usage", chat_id=42)


async def test_in_a_group_it_is_the_senders_own_use_only(tg: TelegramHarness) -> None:
    await seed(tg)
    await tg.start()
    mine = await command(tg, "/usage", **IN_GROUP, user_id=42)
    assert "2 calls, 1,600 tokens in, 400 tokens out" in mine
    assert "5,000" not in mine  # member 9's calls here are theirs
    assert "This is your own use, in every chat with me; nobody else's is shown." in mine
    theirs = await command(tg, "/usage", **IN_GROUP, user_id=9)
    assert "1 call, 5,000 tokens in, 5,000 tokens out" in theirs
    assert "Your daily allowance of 10,000 tokens is used up" in theirs


async def test_without_a_cap_it_says_none_is_set(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path) as tg:
        await tg.start()
        answer = await command(tg, "/usage", chat_id=42)
        assert answer.endswith("No daily allowance is set for you.")


async def test_usage_is_in_the_help_and_the_command_menu(tg: TelegramHarness) -> None:
    await tg.start()
    assert "/usage" in await command(tg, "/help", chat_id=42)
    menu = tg.fake.calls_to("setMyCommands")[-1].params["commands"]
    names = [c["command"] for c in (json.loads(menu) if isinstance(menu, str) else menu)]
    assert "usage" in names


async def test_an_admin_posting_as_the_group_is_told_to_post_as_themselves(
    tg: TelegramHarness,
) -> None:
    anonymous = 1087968824  # Telegram's GroupAnonymousBot
    await record_call(tg.services.backend, "telegram", str(anonymous), 10, 10, tg.clock.now())
    await tg.start()
    message = tg.fake.message("/usage", **IN_GROUP, user_id=anonymous)  # type: ignore[arg-type]
    message["from"].update(is_bot=True, first_name="Group")
    message["sender_chat"] = message["chat"]
    before = len(tg.fake.sent)
    await tg.fake.push({"message": message})
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    assert tg.fake.sent[before].text.startswith("You are posting as the group, so I cannot")
    # As themselves, the same admin sees their own day.
    assert "0 calls" in await command(tg, "/usage", **IN_GROUP, user_id=8)


async def test_a_chat_turn_the_meter_counted_is_in_usage(tg: TelegramHarness) -> None:
    """As `kept run` composes it (bot/services.py): the call a message made
    is the one /usage shows, estimated here (the scripted model gives no
    usage), and charged against the allowance."""
    await tg.start()
    await command(tg, "hello there", chat_id=42)
    answer = await command(tg, "/usage", chat_id=42)
    assert "1 call, " in answer and "(1 call estimated from their length" in answer
    assert "10,000 left" not in answer and "left. It resets at 00:00 UTC" in answer
    assert "0 calls" in await command(tg, "/usage", chat_id=43)
