"""The one wake loop over its due sources."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from core.clock import TestClock
from core.scheduler import FAILED_RETRY, MAX_SLEEP, MIN_SLEEP, Scheduler


class Source:
    def __init__(self, name: str, *, due_in: float | None = None, breaks: bool = False) -> None:
        self.name = name
        self.due_in = due_in
        self.breaks = breaks
        self.runs = 0
        self.started = 0
        self.stopped = False
        self.forgot = 0
        self.ran = asyncio.Event()

    async def start_up(self) -> None:
        self.started += 1

    async def run_due(self) -> None:
        self.runs += 1
        self.ran.set()
        if self.breaks:
            raise OSError("database gone")

    async def next_wake(self, now: datetime) -> datetime | None:
        return None if self.due_in is None else now + timedelta(seconds=self.due_in)

    def stop_taking_work(self) -> None:
        self.stopped = True

    def forget_deferrals(self) -> None:
        self.forgot += 1


async def test_the_loop_wakes_for_the_earliest_source() -> None:
    clock = TestClock()
    soon, later = Source("reminders", due_in=60), Source("followups", due_in=600)
    wake_at = await Scheduler([soon, later], clock=clock).tick()
    assert wake_at == clock.now() + timedelta(seconds=60)
    assert (soon.runs, later.runs) == (1, 1)


async def test_with_nothing_in_view_it_sleeps_at_most_its_cap_and_at_least_its_floor() -> None:
    clock = TestClock()
    assert await Scheduler([Source("idle")], clock=clock).tick() == clock.now() + timedelta(
        seconds=MAX_SLEEP
    )
    busy = Source("busy", due_in=0)
    assert await Scheduler([busy], clock=clock).tick() == clock.now() + MIN_SLEEP


async def test_a_failing_source_never_keeps_the_other_from_its_work() -> None:
    clock = TestClock()
    broken, fine = Source("reminders", breaks=True), Source("followups")
    wake_at = await Scheduler([broken, fine], clock=clock).tick()
    assert fine.runs == 1 and broken.runs == 1
    assert wake_at == clock.now() + FAILED_RETRY


async def test_a_reset_wake_makes_every_source_forget_its_deferrals() -> None:
    a, b = Source("a"), Source("b")
    scheduler = Scheduler([a, b], clock=TestClock())
    scheduler.wake()
    assert (a.forgot, b.forgot) == (0, 0)
    scheduler.wake(reset=True)
    assert (a.forgot, b.forgot) == (1, 1)


async def test_stop_tells_every_source_and_ends_the_loop() -> None:
    clock = TestClock()
    a, b = Source("a", due_in=3600), Source("b")
    scheduler = Scheduler([a, b], clock=clock)
    task = scheduler.start()
    await asyncio.wait_for(b.ran.wait(), 3)  # started up, ticked once
    assert (a.started, b.started, a.runs) == (1, 1, 1)
    await scheduler.stop(grace=1)
    assert task.done() and a.stopped and b.stopped
