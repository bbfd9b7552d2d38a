"""Time as a dependency: core asks a Clock, tests move a TestClock."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from datetime import UTC, datetime, timedelta
from typing import Protocol


def iso_utc(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with a `Z`, to the second: how every `--json` prints times."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    async def sleep(self, seconds: float) -> None: ...


async def sleep_or_until_set(clock: Clock, seconds: float, event: asyncio.Event) -> None:
    """Sleep `seconds` on `clock`, or less if `event` is set meanwhile (a
    wake-up: new work, a state change). The event is left as it is."""
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    waker = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, waker):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class TestClock:
    """A clock that only moves when a test calls `advance`.

    Sleepers wake in deadline order as time passes them, so code that backs
    off or waits for a due time runs instantly under test.
    """

    __test__ = False  # not a pytest class

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deadline = self._now + timedelta(seconds=seconds)
        heapq.heappush(self._sleepers, (deadline, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline passed."""
        target = self._now + timedelta(seconds=seconds)
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, fut = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not fut.done():
                fut.set_result(None)
            # let the woken task run before time moves on
            for _ in range(5):
                await asyncio.sleep(0)
        self._now = target
        await asyncio.sleep(0)

    def set(self, when: datetime) -> None:
        self._now = when
