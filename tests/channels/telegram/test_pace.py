"""Sending at Telegram's pace: sends are held back before they go out, so a
burst never exceeds a group's or the bot's budget in any window, "typing…"
is no message and never waits, and a 429 comes straight back to kept's own
retry rules (max_retries=0).

PTB's limiter runs on the event loop's clock, not on kept's injected one:
these tests put aiolimiter's buckets on a virtual clock (VirtualTime), which
stands still while a request is on its way, so a minute of pacing takes
milliseconds and the counts at the fake Bot API are exact."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiolimiter import AsyncLimiter
from telegram.ext import AIORateLimiter

from channels.telegram.pace import TELEGRAM_PACE, Budget, Pace, PacedSends
from core.messages import Outbound, Target
from tests.support.limiter_clock import InFlight, VirtualTime
from tests.support.telegram_harness import TelegramHarness, telegram_harness

GROUP = -100500


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


def most_in_any_window(times: list[float], window: float) -> int:
    """The largest number of `times` within `window` seconds of one another."""
    return max(sum(1 for t in times if start <= t < start + window) for start in times)


@pytest.fixture
async def virtual(monkeypatch: pytest.MonkeyPatch) -> VirtualTime:
    """Every aiolimiter bucket (PTB's limiter, ours) on one virtual clock."""
    clock = VirtualTime()
    monkeypatch.setattr(AsyncLimiter, "_loop", property(lambda _: clock))
    return clock


async def paced_times(
    virtual: VirtualTime, limiter: AIORateLimiter, chats: list[int]
) -> list[float]:
    """When each request to `chats` left `limiter`, on the virtual clock."""
    left: list[float] = []

    async def post() -> bool:
        left.append(virtual.now)
        return True

    tasks = [
        asyncio.create_task(
            limiter.process_request(post, (), {}, "sendMessage", {"chat_id": chat}, None)
        )
        for chat in chats
    ]
    await virtual.run(tasks)
    return left


async def arrivals(
    tg: TelegramHarness, virtual: VirtualTime, monkeypatch: pytest.MonkeyPatch, chats: list[int]
) -> list[float]:
    """Send one message to each of `chats` at once through the adapter; the
    virtual time at which each reached the fake Bot API. The clock stands
    still while a request is on its way, so that is when it left the limiter."""
    arrived: list[float] = []
    answer = tg.fake._api_sendMessage

    async def record(params: dict[str, Any]) -> dict[str, Any]:
        arrived.append(virtual.now)
        return await answer(params)

    monkeypatch.setattr(tg.fake, "_api_sendMessage", record)
    in_flight = InFlight()
    process = PacedSends.process_request

    async def counted(self: PacedSends, callback: Any, *rest: Any, **named: Any) -> Any:
        async def request(*args: Any, **kwargs: Any) -> Any:
            with in_flight:
                return await callback(*args, **kwargs)

        return await process(self, request, *rest, **named)

    monkeypatch.setattr(PacedSends, "process_request", counted)
    adapter = tg.adapters[0]
    tasks = [
        asyncio.create_task(
            adapter.send(Outbound(target=Target("telegram", str(chat)), text=f"message {n}"))
        )
        for n, chat in enumerate(chats)
    ]
    await asyncio.wait_for(virtual.run(tasks, in_flight), 10)
    assert all(task.result().ok for task in tasks)
    return arrived


def test_the_default_budgets_hold_over_any_window() -> None:
    """A bucket's burst plus what drains from it within one window never
    exceeds the budget (PTB's own default, a bucket of 20 per 60 s, lets a
    burst of 40 put 39 in a group within the first minute)."""
    for budget, limit, window in (
        (TELEGRAM_PACE.group, 20, 60.0),
        (TELEGRAM_PACE.overall, 30, 1.0),
    ):
        capacity, period = budget.bucket()
        assert capacity + capacity / period * window <= limit + 1e-9
    with pytest.raises(ValueError):
        Budget(limit=5, window=1.0, burst=5)


async def test_forty_sends_to_one_group_reach_telegram_at_most_twenty_a_minute(
    tg: TelegramHarness, virtual: VirtualTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    await tg.start()  # Telegram's own budgets

    arrived = await arrivals(tg, virtual, monkeypatch, [GROUP] * 40)

    assert len(arrived) == 40
    assert sorted(tg.fake.texts(GROUP)) == sorted(f"message {n}" for n in range(40))
    assert most_in_any_window(arrived, 60.0) <= 20
    assert arrived.count(0.0) == TELEGRAM_PACE.group.burst  # a short burst goes at once
    assert arrived[-1] < 200  # paced, not stalled: 32 more at 12 a minute


async def test_a_hundred_sends_to_private_chats_reach_telegram_at_most_thirty_a_second(
    tg: TelegramHarness, virtual: VirtualTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    await tg.start()

    arrived = await arrivals(tg, virtual, monkeypatch, list(range(1, 101)))

    assert len(arrived) == 100
    assert most_in_any_window(arrived, 1.0) <= 30
    assert arrived[-1] < 5


async def test_ptbs_default_budget_would_put_39_of_40_in_a_groups_first_minute(
    virtual: VirtualTime,
) -> None:
    """Why kept sets its own budgets (see channels/telegram/pace.py)."""
    ptb = await paced_times(virtual, AIORateLimiter(max_retries=0), [GROUP] * 40)
    assert most_in_any_window(ptb, 60.0) == 39
    ours = await paced_times(virtual, PacedSends(), [GROUP] * 40)
    assert most_in_any_window(ours, 60.0) <= 20


async def test_typing_is_not_a_message_and_never_waits_for_the_budget(
    tg: TelegramHarness,
) -> None:
    # One message now, the next only ten seconds later: were "typing…"
    # counted, the message below would wait those ten seconds.
    tight = Budget(limit=2, window=10.0, burst=1)
    adapter = await tg.start(pace=Pace(overall=tight, group=tight))
    target = Target("telegram", str(GROUP))
    typing = asyncio.create_task(adapter.keep_typing(target))
    try:
        for shown in range(1, 4):
            await tg.fake.wait_for(lambda n=shown: len(tg.fake.calls_to("sendChatAction")) >= n)  # type: ignore[misc]
            await tg.clock.advance(5)
        result = await asyncio.wait_for(adapter.send(Outbound(target=target, text="hi")), 1)
    finally:
        typing.cancel()
    assert result.ok and tg.fake.texts(GROUP) == ["hi"]


async def test_a_429_comes_straight_back_to_keeps_retry_rules(
    tg: TelegramHarness, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = await tg.start()
    tg.fake.fail("sendMessage", 429, "Too Many Requests: retry after 60", retry_after=60)

    with caplog.at_level(logging.DEBUG):
        outbound = Outbound(target=Target("telegram", "42"), text="hello")
        result = await asyncio.wait_for(adapter.send(outbound), 2)

    # Longer than send.py waits inline: handed back for the caller's backoff,
    # after one request (the limiter itself retried nothing).
    assert result.retryable and result.retry_after == 60
    assert len(tg.fake.calls_to("sendMessage")) == 1
    assert not [r for r in caplog.records if r.name.startswith("telegram.ext.AIORateLimiter")]
