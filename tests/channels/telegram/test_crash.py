"""No message is lost between Telegram and the store: an update is confirmed
(the next getUpdates offset) only after its message is stored, and a restart
answers what was stored but not answered, exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.llm import Completion
from tests.channels.telegram.test_storage_faults import until
from tests.fakes.telegram_server import Script
from tests.support.scripted_model import text
from tests.support.store_faults import DiskFull
from tests.support.telegram_harness import TelegramHarness, telegram_harness

PRIVATE = "agent:main:telegram:private:42"


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


def block_model(tg: TelegramHarness) -> asyncio.Event:
    """The next model call hangs until the returned event is set (or the
    turn is cancelled): the moment a crash would catch the bot mid-turn."""
    called = asyncio.Event()

    async def hang(messages: list[dict[str, Any]], tools: Any) -> Completion:
        called.set()
        await asyncio.Event().wait()
        return text("never")

    tg.model.steps.append(hang)
    return called


async def stored_users(tg: TelegramHarness) -> list[str]:
    return [t for role, _, t in await tg.transcript(PRIVATE) if role == "user"]


@pytest.mark.slow
async def test_an_update_is_confirmed_only_after_its_message_is_stored(
    tg: TelegramHarness,
) -> None:
    # The first tries to store fail, and the fake holds any confirmation:
    # a bot that confirmed before storing is caught every time, because the
    # row cannot exist yet whatever the timing.
    full = DiskFull(tg.store)
    gate = tg.fake.hold_confirmations()
    in_model = block_model(tg)
    await tg.start()
    update = await tg.fake.push_message("remember this", chat_id=42)
    await until(tg, lambda: full.failures >= 1 or gate.arrived.is_set())
    polls = len(tg.fake.calls_to("getUpdates"))
    # The bot asks Telegram again while the message is held (other chats
    # must go on), without confirming it.
    await until(tg, lambda: len(tg.fake.calls_to("getUpdates")) > polls or gate.arrived.is_set())
    assert not gate.arrived.is_set(), "confirmed before the message was stored"
    assert max(tg.fake.offsets()) <= update["update_id"]

    full.active = False
    await until(tg, gate.arrived.is_set)
    # The confirming request is on its way and held: the row is there already.
    assert gate.waiting == [[update["update_id"]]]
    assert await stored_users(tg) == ["remember this"]
    gate.release()
    await asyncio.wait_for(in_model.wait(), 5)
    await tg.fake.wait_for(lambda: tg.fake.confirmed)
    assert tg.fake.sent == []  # confirmed while the model was still thinking


@pytest.mark.slow
async def test_stop_mid_turn_after_confirmation_then_restart_answers_once(
    tg: TelegramHarness,
) -> None:
    in_model = block_model(tg)
    first = await tg.start()
    await tg.fake.push_message("are you still there?", chat_id=42)
    await asyncio.wait_for(in_model.wait(), 5)
    await tg.fake.wait_for(lambda: tg.fake.confirmed)
    await tg.stop(first)  # the turn is cancelled: stored, not answered

    assert await stored_users(tg) == ["are you still there?"]
    assert tg.fake.sent == []

    await tg.start()  # recovers stored-but-unanswered messages, as `kept run` does
    await tg.fake.wait_for(lambda: tg.fake.sent)
    await tg.fake.push_message("thanks", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)
    assert tg.fake.texts() == ["echo: are you still there?", "echo: thanks"]


@pytest.mark.slow
async def test_crash_after_storing_but_before_confirming_loses_nothing_and_answers_once(
    tg: TelegramHarness,
) -> None:
    in_model = block_model(tg)
    # The confirming getUpdates never reaches Telegram: the process "dies" first.
    first = await tg.start()
    await tg.fake.wait_for(lambda: tg.fake.calls_to("getUpdates"))  # the poll is waiting
    tg.fake.script("getUpdates", Script(502, "Bad Gateway"))
    update = await tg.fake.push_message("don't lose me", chat_id=42)
    await asyncio.wait_for(in_model.wait(), 5)
    await tg.fake.wait_for(lambda: len(tg.fake.calls_to("getUpdates")) >= 2)
    await tg.stop(first)

    assert tg.fake.confirmed == []  # Telegram still has the update
    assert await stored_users(tg) == ["don't lose me"]

    await tg.start()
    # Redelivered (a duplicate for the store), recovered from the store once.
    await tg.fake.wait_for(lambda: update["update_id"] in tg.fake.confirmed)
    await tg.fake.wait_for(lambda: tg.fake.sent)
    await tg.fake.push_message("still one answer?", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    assert tg.fake.texts() == ["echo: don't lose me", "echo: still one answer?"]
    assert await stored_users(tg) == ["don't lose me", "still one answer?"]


async def test_stop_lets_a_quick_turn_finish(tg: TelegramHarness) -> None:
    tg.model.delay = 0.2
    adapter = await tg.start(stop_grace=2)
    await tg.fake.push_message("quick one", chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.calls_to("sendChatAction"))
    await tg.stop(adapter)

    assert tg.fake.texts() == ["echo: quick one"]


async def test_messages_of_one_chat_are_answered_in_order(tg: TelegramHarness) -> None:
    tg.model.delay = 0.05
    await tg.start()
    for n in range(5):
        await tg.fake.push_message(f"message {n}", chat_id=42)
    await tg.fake.push_message("other chat", chat_id=43)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 6)

    assert tg.fake.texts(42) == [f"echo: message {n}" for n in range(5)]
    assert await stored_users(tg) == [f"message {n}" for n in range(5)]
