"""Starting while the Bot API does not answer: the adapter starts
unconnected (not ready, nothing sent through it) and connects in the
background with backoff on the injected clock; a rejected token still fails
at once, as one line. Polling that keeps failing makes it not ready."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from channels.base import ChannelStartError
from channels.telegram.adapter import TelegramAdapter
from channels.telegram.connection import POLL_FAILURES_NOT_READY
from tests.fakes.telegram_server import TOKEN
from tests.support.telegram_harness import TelegramHarness, drive, telegram_harness


@pytest.fixture
async def tg(tmp_path: Path) -> Any:
    async with telegram_harness(tmp_path) as harness:
        yield harness


async def until(check: Any, within: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_an_unreachable_api_at_start_is_retried_with_backoff(tg: TelegramHarness) -> None:
    tg.fake.unreachable = True
    adapter = await tg.start()  # returns: `kept run` stays up
    assert not adapter.connected and not adapter.accepts_sends
    assert tg.router.platforms == set()  # the heartbeat and recovery wait
    assert len(tg.fake.calls_to("getMe")) == 1
    # Backoff 1, 2, 4 s on the test clock: no retry before each is over.
    for wait, calls in ((1, 2), (2, 3), (4, 4)):
        await until(lambda: tg.clock.sleepers >= 1)
        await tg.clock.advance(wait - 0.01)
        await asyncio.sleep(0.05)
        assert len(tg.fake.calls_to("getMe")) == calls - 1
        await tg.clock.advance(0.01)
        await until(lambda n=calls: len(tg.fake.calls_to("getMe")) == n)
    assert not adapter.connected
    tg.fake.unreachable = False  # the network is back
    await drive(tg.clock, until(lambda: adapter.connected))
    assert adapter.accepts_sends and tg.router.platforms == {"telegram"}
    await tg.fake.push_message("hello after the outage", chat_id=42)
    await drive(tg.clock, tg.fake.wait_for(lambda: tg.fake.sent))
    assert tg.fake.texts() == ["echo: hello after the outage"]


async def test_a_5xx_at_start_is_retried_and_a_stop_ends_the_retrying(
    tg: TelegramHarness,
) -> None:
    tg.fake.fail("getMe", 502, "Bad Gateway")
    tg.fake.fail("getMe", 500, "Internal Server Error")
    adapter = await tg.start()
    assert not adapter.connected
    await drive(tg.clock, until(lambda: adapter.connected))
    assert len(tg.fake.calls_to("getMe")) == 3
    await tg.stop(adapter)

    tg.fake.unreachable = True
    retrying = await tg.start()
    await until(lambda: tg.clock.sleepers >= 1)
    await asyncio.wait_for(tg.stop(retrying), 2)  # cancels the retry loop
    calls = len(tg.fake.calls)
    await tg.clock.advance(120)
    await asyncio.sleep(0.05)
    assert len(tg.fake.calls) == calls and not retrying.connected


@pytest.mark.parametrize("status", [401, 404])
async def test_a_rejected_token_still_fails_at_once(tg: TelegramHarness, status: int) -> None:
    tg.fake.fail("getMe", status, "Unauthorized" if status == 401 else "Not Found")
    adapter: TelegramAdapter = tg.adapter()
    with pytest.raises(ChannelStartError) as info:
        await adapter.start()
    message = str(info.value)
    assert message.startswith("Telegram rejected the token in $TELEGRAM_BOT_TOKEN")
    assert "\n" not in message and TOKEN not in message
    assert len(tg.fake.calls_to("getMe")) == 1 and tg.clock.sleepers == 0


async def test_polling_that_keeps_failing_makes_the_adapter_not_ready(
    tg: TelegramHarness,
) -> None:
    adapter = await tg.start()
    await until(lambda: len(tg.fake.calls_to("getUpdates")) >= 1)
    assert adapter.connected
    for _ in range(POLL_FAILURES_NOT_READY + 2):
        tg.fake.fail("getUpdates", 502, "Bad Gateway")
    failures = adapter._intake.poll_failures if adapter._intake else -1
    ready_at: dict[int, bool] = {}  # failures in a row -> ready then

    async def watch() -> None:
        while len(ready_at) <= POLL_FAILURES_NOT_READY + 1:
            intake = adapter._intake
            assert intake is not None
            ready_at[intake.poll_failures] = adapter.connected
            await asyncio.sleep(0.005)

    await drive(tg.clock, asyncio.wait_for(watch(), 5))
    assert failures == 0
    # Ready through two failures in a row, not from the third on.
    assert ready_at[2] is True and ready_at[POLL_FAILURES_NOT_READY] is False
    await tg.fake.push_message("are you there?", chat_id=42)
    await drive(tg.clock, tg.fake.wait_for(lambda: tg.fake.sent))
    assert adapter.connected  # ready again once getUpdates answered
    assert tg.fake.texts() == ["echo: are you there?"]
