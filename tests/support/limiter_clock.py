"""A virtual clock for tests of sending at a platform's pace: kept's
Telegram pace (channels/telegram/pace.py) takes it as its PaceClock, and
aiolimiter's buckets (monkeypatch AsyncLimiter's `_loop`) run on it too;
kept's injected TestClock moves neither. `run`
jumps from one limiter timer to the next once everything ready has run and
no request is on its way, so minutes of pacing take milliseconds and every
count is exact."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from typing import Any


class InFlight:
    """Counts requests on their way to the fake Bot API."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def __enter__(self) -> None:
        self.count += 1
        self._idle.clear()

    def __exit__(self, *exc: object) -> None:
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    async def none(self) -> None:
        await self._idle.wait()


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

    async def sleep(self, seconds: float) -> None:
        """Sleep on the virtual clock (what channels/telegram/pace.py's
        PaceClock asks)."""
        done = self._real.create_future()
        self.call_at(self.now + max(0.0, seconds), lambda: done.done() or done.set_result(None))
        await done

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

    async def run(self, tasks: list[asyncio.Task[Any]], requests: InFlight | None = None) -> None:
        """Let the tasks run; whenever all of them wait (and no request is on
        its way: real I/O), jump to the next timer."""
        while True:
            for _ in range(20):  # everything ready runs
                await asyncio.sleep(0)
            if requests is not None:
                await requests.none()  # the virtual clock stands still meanwhile
            if all(task.done() for task in tasks):
                return
            while self._timers and self._timers[0][2].cancelled():
                heapq.heappop(self._timers)
            if not self._timers:
                continue  # woken by I/O just now
            when, _, handle = heapq.heappop(self._timers)
            # A real clock has always moved on a little: without that, a
            # bucket a rounding error short of room would wait forever.
            self.now = max(self.now + 1e-9, when)
            handle._run()
