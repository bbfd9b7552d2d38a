"""The scheduler: one wake loop per process over the sources of timed work.

Each due source (follow-ups, reminders) says when it next has work and does
the work due now; the loop sleeps until the earliest of those times and is
woken early when something new is stored (the Wake, which crosses workers on
PostgreSQL). Every source settles its own claims; the loop only decides when
to look and when to stop.

`stop(grace)` takes no new work and gives the running tick `grace` seconds
(on the injected clock); then it is cancelled, and each claim settles by its
phase (core/delivery/claim.py): unsent ones are released, never failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from core.clock import Clock, sleep_or_until_set
from core.logs import event
from core.wake import Wake

log = logging.getLogger("kept.scheduler")

MAX_SLEEP = 300.0
MIN_SLEEP = timedelta(seconds=1)
# A source whose work failed is looked at again after this.
FAILED_RETRY = timedelta(seconds=30)


class DueSource(Protocol):
    """One kind of timed work the scheduler serves."""

    @property
    def name(self) -> str:
        """Names the source in the scheduler's log events."""
        ...

    async def start_up(self) -> None:
        """Settle what a previous process left behind (expired leases only:
        a live claim may be another worker's), before the first tick."""
        ...

    async def run_due(self) -> None:
        """Do the work due now (claim, deliver, settle)."""
        ...

    async def next_wake(self, now: datetime) -> datetime | None:
        """When this source next has something to do: due work, a lease that
        runs out, a chat that may speak again. None: nothing in view."""
        ...

    def stop_taking_work(self) -> None:
        """Claim nothing new from now on; work under way goes on."""
        ...

    def forget_deferrals(self) -> None:
        """Look at everything again (the config or the running platforms changed)."""
        ...


class Scheduler:
    def __init__(
        self, sources: Sequence[DueSource], *, clock: Clock, wake: Wake | None = None
    ) -> None:
        # In this order on every tick.
        self._sources = tuple(sources)
        self._clock = clock
        # Set by whoever stores new timed work (reminders, extraction, snoozes).
        self._wake = wake if wake is not None else Wake()
        # Sources whose last work failed, and when to try them again.
        self._retry: dict[str, datetime] = {}
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def wake(self, *, reset: bool = False) -> None:
        """Look again now; `reset` forgets deferrals (config or adapters changed)."""
        if reset:
            for source in self._sources:
                source.forget_deferrals()
        self._wake()

    async def start_up(self) -> None:
        for source in self._sources:
            await source.start_up()

    def start(self) -> asyncio.Task[None]:
        """Run the loop as a task that `stop` can end with grace."""
        self._task = asyncio.create_task(self.run(), name="scheduler")
        return self._task

    async def stop(self, grace: float) -> None:
        """Take no new work, give the running tick `grace` seconds (on the
        injected clock) to finish, then cancel it: a claim that has not
        reached `sending` is then released, never failed."""
        self._stopping = True
        for source in self._sources:
            source.stop_taking_work()
        self._wake()
        task = self._task
        if task is None or task.done():
            return
        timer = asyncio.ensure_future(self._clock.sleep(grace))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        if not task.done():
            event(
                log,
                logging.WARNING,
                "scheduler_stop_grace_exceeded",
                grace_s=grace,
                action="none: unsent claims were released, a send in flight is not repeated",
            )
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def run(self) -> None:
        await self.start_up()
        while not self._stopping:
            wake_at = await self.tick()
            if self._stopping:
                break
            await self._sleep_until(wake_at)

    async def tick(self) -> datetime:
        """Do all work due now, source by source; return when to look next.
        A source that fails is logged and retried later; it never keeps the
        others from their work."""
        for source in self._sources:
            if self._stopping:
                break
            try:
                await source.run_due()
            except Exception as exc:  # the scheduler must outlive a bad tick
                event(
                    log,
                    logging.ERROR,
                    "scheduler_tick_failed",
                    source=source.name,
                    error=repr(exc),
                    action="check the database; the scheduler retries on its own",
                )
                self._retry[source.name] = self._clock.now() + FAILED_RETRY
            else:
                self._retry.pop(source.name, None)
        return await self._next_wake(self._clock.now())

    async def _next_wake(self, now: datetime) -> datetime:
        candidates = [now + timedelta(seconds=MAX_SLEEP), *self._retry.values()]
        for source in self._sources:
            try:
                nxt = await source.next_wake(now)
            except Exception as exc:
                event(
                    log,
                    logging.ERROR,
                    "scheduler_tick_failed",
                    source=source.name,
                    error=repr(exc),
                    action="check the database; the scheduler retries on its own",
                )
                nxt = now + FAILED_RETRY
            if nxt is not None:
                candidates.append(nxt)
        # A floor keeps a row that is due but cannot be taken (mid-send, say)
        # from turning the loop into a busy wait.
        return max(min(candidates), now + MIN_SLEEP)

    async def _sleep_until(self, when: datetime) -> None:
        seconds = (when - self._clock.now()).total_seconds()
        if self._wake.event.is_set():
            self._wake.event.clear()
            return
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        await sleep_or_until_set(self._clock, seconds, self._wake.event)
        self._wake.event.clear()
