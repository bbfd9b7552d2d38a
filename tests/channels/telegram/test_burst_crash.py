"""A stop in the middle of a burst loses no reply: a reply still waiting in
kept's own pace never left the process and is sent after the restart,
exactly once; a reply whose request had left (it may have been taken) is
never sent again. And "typing…" is spent only on turns whose model call
runs, never on messages waiting for their turn."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.telegram.pace import Budget, Pace
from core.llm import Completion
from tests.support.scripted_model import text
from tests.support.telegram_harness import TelegramHarness, telegram_harness

CHATS = range(1, 6)


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


async def send_states(tg: TelegramHarness) -> Counter[str | None]:
    rows = await tg.store.connection.fetchall(  # type: ignore[attr-defined]
        "SELECT send_state FROM messages WHERE role = 'assistant'"
    )
    return Counter(row[0] for row in rows)


async def test_replies_waiting_in_the_pace_are_sent_after_a_restart_exactly_once(
    tg: TelegramHarness,
) -> None:
    # One message a minute: the first reply leaves (and is held at the fake,
    # its fate unknown to kept), the other four wait in the pace.
    first = await tg.start(pace=Pace(overall=Budget(limit=1, window=60.0)))
    gate = tg.fake.hold_sends()
    for chat in CHATS:
        await tg.fake.push_message(f"hello {chat}", chat_id=chat)
    await asyncio.wait_for(gate.arrived.wait(), 5)
    await tg.fake.wait_for(lambda: len(tg.model.requests) == len(CHATS))
    await tg.fake.wait_for(lambda: len(tg.fake.confirmed) == len(CHATS))
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert await send_states(tg) == {"sending": 1, "stored": 4}
    [[left]] = gate.waiting

    await tg.stop(first)  # the turns are cancelled; the held request is on its way
    gate.release()  # ... and Telegram takes it after all
    await tg.fake.wait_for(lambda: len(tg.fake.sent) == 1)
    tg.fake.send_gate = None

    await tg.start()  # recovery, as `kept run` does at start
    await tg.fake.wait_for(lambda: len(tg.fake.sent) == len(CHATS))
    await asyncio.sleep(0.2)  # a second copy would arrive now

    assert sorted(s.chat_id for s in tg.fake.sent) == list(CHATS)
    assert tg.fake.sent[0].chat_id == left
    assert all(s.text == f"echo: hello {s.chat_id}" for s in tg.fake.sent)
    assert len(tg.model.requests) == len(CHATS)  # sent as stored, not asked again
    assert await send_states(tg) == {"sending": 1, "sent": 4}


async def test_typing_shows_only_for_running_model_calls_bounded_by_the_pace(
    tg: TelegramHarness,
) -> None:
    """Three messages in each of 10 chats at once, every model call held:
    the 20 messages queued behind their chat's first show no "typing…", and
    of the 10 running calls only as many type as the pace lets replies out
    at once (3 here)."""
    release = asyncio.Event()

    async def held(messages: list[dict[str, Any]], tools: Any) -> Completion:
        await release.wait()
        return text("noted")

    tg.model.steps.extend([held] * 30)
    await tg.start(pace=Pace(overall=Budget(limit=3, window=0.2)))
    for n in range(3):
        for chat in range(1, 11):
            await tg.fake.push_message(f"m{chat}-{n}", chat_id=chat)
    await tg.fake.wait_for(lambda: len(tg.fake.confirmed) == 30)
    await tg.fake.wait_for(lambda: len(tg.model.requests) == 10)
    for _ in range(20):
        await asyncio.sleep(0.01)

    assert len(tg.fake.calls_to("sendChatAction")) == 3
    release.set()
    await tg.fake.wait_for(lambda: len(tg.fake.sent) == 30, within=20)
    assert len(tg.fake.calls_to("sendChatAction")) <= 30  # never more than replies
