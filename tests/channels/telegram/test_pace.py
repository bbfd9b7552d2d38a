"""Sending at Telegram's pace: a sliding window that sustains its limit and
never exceeds it in any window, a group's own minute, "typing…" outside the
budget, the moment a message leaves after its wait, and flood control: a 429
holds every send for its retry_after, and the refused message is sent again
until its deadline.

The pace runs on a virtual clock (VirtualTime) that stands still while a
request is on its way, so minutes of pacing take milliseconds and the counts
are exact."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from telegram.error import RetryAfter

from channels.departure import Departure
from channels.telegram.pace import TELEGRAM_PACE, Budget, Pace, PacedSends
from core.messages import Outbound, Target
from tests.support.limiter_clock import VirtualTime
from tests.support.telegram_harness import TelegramHarness, telegram_harness

GROUP = -100500


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


def most_in_any_window(times: list[float], window: float) -> int:
    """The largest number of `times` within `window` seconds of one another."""
    return max(sum(1 for t in times if start <= t < start + window) for start in times)


async def sends(
    virtual: VirtualTime,
    limiter: PacedSends,
    chats: list[int],
    answer: Callable[[int], Awaitable[bool]] | None = None,
    departures: list[Departure | None] | None = None,
) -> list[tuple[float, int]]:
    """One message to each of `chats` at once through `limiter`: (virtual
    time, chat) of every request that reached "Telegram" (`answer` may
    refuse it by raising)."""
    arrived: list[tuple[float, int]] = []

    def post(chat: int) -> Callable[[], Awaitable[bool]]:
        async def request() -> bool:
            arrived.append((virtual.now, chat))
            return True if answer is None else await answer(chat)

        return request

    tasks = [
        asyncio.create_task(
            limiter.process_request(
                post(chat),
                (),
                {},
                "sendMessage",
                {"chat_id": chat},
                departures[n] if departures else None,
            )
        )
        for n, chat in enumerate(chats)
    ]
    await asyncio.wait_for(virtual.run(tasks), 10)
    for task in tasks:
        task.result()
    return arrived


@pytest.fixture
async def virtual() -> VirtualTime:
    return VirtualTime()


async def test_the_overall_window_sustains_29_a_second_and_never_more(
    virtual: VirtualTime,
) -> None:
    """A leaky bucket (burst 10, draining 20 a second) took 4.5 s for these
    100; the sliding window sends 29 in each second."""
    limiter = PacedSends(Pace(clock=virtual))
    times = [t for t, _ in await sends(virtual, limiter, list(range(1, 101)))]

    assert len(times) == 100
    assert most_in_any_window(times, 1.0) == 29 == TELEGRAM_PACE.overall.limit
    assert times.count(0.0) == 29  # a burst goes at once, up to the limit
    assert max(times) <= 3.0 + 1e-6  # 29, 29, 29, then the last 13


async def test_forty_messages_to_one_group_go_at_most_nineteen_a_minute(
    virtual: VirtualTime,
) -> None:
    limiter = PacedSends(Pace(clock=virtual))
    times = [t for t, _ in await sends(virtual, limiter, [GROUP] * 40)]

    assert len(times) == 40
    assert most_in_any_window(times, 60.0) == 19  # Telegram's 20, one under
    assert max(times) <= 120.0 + 1e-6


async def test_a_message_departs_after_its_wait_just_before_its_request(
    virtual: VirtualTime,
) -> None:
    """The Departure (a reply's `sending` mark) is called when the request
    goes, not when the message starts waiting for the pace."""
    limiter = PacedSends(Pace(overall=Budget(limit=1, window=10.0), clock=virtual))
    left: list[float] = []

    async def leaving() -> bool:
        left.append(virtual.now)
        return True

    departures: list[Departure | None] = [Departure(leaving), Departure(leaving)]
    arrived = await sends(virtual, limiter, [1, 2], departures=departures)

    assert left == [0.0, 10.0]
    assert [t for t, _ in arrived] == [0.0, 10.0]


async def test_a_flood_wait_holds_every_send_and_the_refused_one_goes_again(
    virtual: VirtualTime,
) -> None:
    """Chat 1 is refused once with retry_after 5: nothing at all goes during
    those 5 s, then chat 1's message again, exactly once more."""
    limiter = PacedSends(Pace(overall=Budget(limit=1, window=1.0), clock=virtual))
    refused: list[int] = []

    async def answer(chat: int) -> bool:
        if chat == 1 and not refused:
            refused.append(chat)
            raise RetryAfter(5)
        return True

    arrived = await sends(virtual, limiter, [1, 2, 3], answer)

    assert [c for _, c in arrived].count(1) == 2  # refused, then taken
    assert sorted(c for _, c in arrived) == [1, 1, 2, 3]
    after = [t for t, _ in arrived[1:]]
    assert min(after) >= 5.0  # every send waited out the flood
    assert most_in_any_window(after, 1.0) == 1


async def test_a_message_refused_past_its_deadline_goes_back_as_a_429(
    virtual: VirtualTime,
) -> None:
    limiter = PacedSends(Pace(flood_deadline=30.0, clock=virtual))

    async def answer(chat: int) -> bool:
        raise RetryAfter(10)

    with pytest.raises(RetryAfter):
        await sends(virtual, limiter, [1], answer)
    assert virtual.now >= 20.0  # refused at 0, 10 and 20; the next wait passes 30


async def test_after_a_flood_the_limit_is_what_telegram_took(virtual: VirtualTime) -> None:
    """Telegram takes 3 of a burst of 10 and refuses the rest for 2 s: from
    then on kept sends 3 a second, so the rest go without another 429."""
    limiter = PacedSends(Pace(overall=Budget(limit=10, window=1.0), clock=virtual))
    taken: list[float] = []
    pause_until = 0.0

    async def answer(chat: int) -> bool:
        nonlocal pause_until
        now = virtual.now
        recent = [t for t in taken if t > now - 1.0]
        if now < pause_until or len(recent) >= 3:
            pause_until = max(pause_until, now + 2)
            raise RetryAfter(2)
        taken.append(now)
        return True

    arrived = await sends(virtual, limiter, list(range(1, 11)), answer)

    assert len(taken) == 10
    refusals = len(arrived) - len(taken)
    assert refusals >= 1
    assert [t for t, _ in arrived[: 3 + refusals]] == [0.0] * (3 + refusals)  # none after
    assert limiter.limit == 3


async def test_typing_is_not_a_message_and_never_waits_for_the_budget(
    tg: TelegramHarness,
) -> None:
    # One message in ten seconds: were "typing…" counted, the message below
    # would wait those ten seconds.
    tight = Budget(limit=1, window=10.0)
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


async def test_limits_without_room_are_refused() -> None:
    with pytest.raises(ValueError):
        Budget(limit=0, window=1.0)
    with pytest.raises(ValueError):
        Budget(limit=5, window=0)
