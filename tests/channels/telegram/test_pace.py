"""Sending at Telegram's pace: sends are held back before they go out, so a
burst never exceeds a group's or the bot's budget in any window, "typing…"
is no message and never waits, and a 429 comes straight back to kept's own
retry rules (max_retries=0).

PTB's limiter runs on the event loop's clock, not on kept's injected one:
the production budgets are checked on a virtual clock put under aiolimiter
(VirtualTime), and the sends through the adapter and the fake Bot API in
real time, with budgets shrunk to fractions of a second."""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiolimiter import AsyncLimiter
from telegram.ext import AIORateLimiter

from channels.telegram.pace import TELEGRAM_PACE, Budget, Pace, PacedSends
from core.messages import Outbound, Target
from tests.fakes.telegram_server import Call
from tests.support.telegram_harness import TelegramHarness, telegram_harness

GROUP = -100500
ROOMY = Budget(limit=1000, window=1.0, burst=500)  # out of the way


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


def most_in_any_window(calls: list[Call] | list[float], window: float) -> int:
    """The largest number of calls that arrived within `window` seconds of one another."""
    times = sorted(c.at if isinstance(c, Call) else c for c in calls)
    return max(sum(1 for t in times if start <= t < start + window) for start in times)


class VirtualTime:
    """What aiolimiter asks of its event loop, on a virtual clock: futures and
    callbacks run on the real loop, timers wait until `run` reaches them, so
    minutes of pacing take milliseconds and no real time decides anything."""

    def __init__(self) -> None:
        self.now = 0.0
        self._real = asyncio.get_running_loop()
        self._timers: list[tuple[float, int, asyncio.TimerHandle]] = []

    def time(self) -> float:
        return self.now

    def is_closed(self) -> bool:
        return False

    def create_future(self) -> asyncio.Future[None]:
        return self._real.create_future()

    def call_soon(self, callback: Callable[..., object], *args: object) -> asyncio.Handle:
        return self._real.call_soon(callback, *args)

    def call_at(self, when: float, callback: Callable[..., object], *args: object) -> Any:
        handle = asyncio.TimerHandle(when, callback, args, self._real)
        heapq.heappush(self._timers, (when, id(handle), handle))
        return handle

    async def run(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Let the tasks run; whenever all of them wait, jump to the next timer."""
        while not all(task.done() for task in tasks):
            for _ in range(20):  # everything ready runs, in-loop, no I/O
                await asyncio.sleep(0)
            while self._timers and self._timers[0][2].cancelled():
                heapq.heappop(self._timers)
            if all(task.done() for task in tasks):
                return
            assert self._timers, "the tasks wait for something that is no timer"
            when, _, handle = heapq.heappop(self._timers)
            # A real clock has always moved on a little: without that, a
            # bucket a rounding error short of room would wait forever.
            self.now = max(self.now + 1e-9, when)
            handle._run()


async def paced_times(
    limiter: AIORateLimiter, chats: list[int], monkeypatch: pytest.MonkeyPatch
) -> list[float]:
    """When each request to `chats` left `limiter`, on a virtual clock."""
    virtual = VirtualTime()
    monkeypatch.setattr(AsyncLimiter, "_loop", property(lambda _: virtual))
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


async def burst(tg: TelegramHarness, chats: list[int]) -> None:
    adapter = tg.adapters[0]
    sends = [
        adapter.send(Outbound(target=Target("telegram", str(chat)), text=f"message {n}"))
        for n, chat in enumerate(chats)
    ]
    results = await asyncio.wait_for(asyncio.gather(*sends), 5)
    assert all(r.ok for r in results)


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


async def test_forty_sends_to_one_group_never_exceed_twenty_in_any_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    left = await paced_times(PacedSends(), [GROUP] * 40, monkeypatch)

    assert len(left) == 40
    assert most_in_any_window(left, 60.0) <= 20
    assert left.count(0.0) == TELEGRAM_PACE.group.burst  # a short burst goes at once
    # PTB's own default budget: 20 at once, then 19 more within that minute.
    ptb = await paced_times(AIORateLimiter(max_retries=0), [GROUP] * 40, monkeypatch)
    assert most_in_any_window(ptb, 60.0) == 39


async def test_a_hundred_sends_to_private_chats_never_exceed_thirty_in_any_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    left = await paced_times(PacedSends(), list(range(1, 101)), monkeypatch)

    assert len(left) == 100
    assert most_in_any_window(left, 1.0) <= 30


async def test_a_burst_to_one_group_keeps_the_groups_budget(tg: TelegramHarness) -> None:
    group = Budget(limit=4, window=0.3, burst=2)
    await tg.start(pace=Pace(overall=ROOMY, group=group))

    await burst(tg, [GROUP] * 6)

    sent = tg.fake.calls_to("sendMessage")
    assert len(sent) == 6 and tg.fake.texts(GROUP) == [f"message {n}" for n in range(6)]
    assert most_in_any_window(sent, group.window) <= group.limit
    # Paced, not serialised: the first `burst` went out together.
    assert sent[1].at - sent[0].at < 0.1


async def test_a_burst_to_many_chats_keeps_the_overall_budget(tg: TelegramHarness) -> None:
    overall = Budget(limit=4, window=0.3, burst=2)
    await tg.start(pace=Pace(overall=overall, group=ROOMY))

    await burst(tg, list(range(1, 7)))  # six private chats

    sent = tg.fake.calls_to("sendMessage")
    assert len(sent) == 6
    assert most_in_any_window(sent, overall.window) <= overall.limit


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
