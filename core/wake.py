"""Wake: the nudge from whoever stores new timed work to the loop that
sleeps until its next due time.

Made first in the composition root and handed to both sides as a
constructor argument, so no service is patched after it is built.

With several workers on one database, a follow-up stored by one worker may
belong to a chat another worker delivers first: a `WakeChannel` (the
backend's: LISTEN/NOTIFY on PostgreSQL; on SQLite another process's commit,
such as a `kept commitments snooze`) carries the nudge to every worker.
Losing a nudge delays a delivery to the sleeper's next look (its sleep is
capped), never loses it: the due rows are in the database.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Callable

from core.clock import Clock
from core.logs import event

log = logging.getLogger("kept.wake")


class WakeChannel(abc.ABC):
    """Carries wakes between the workers of one database."""

    @abc.abstractmethod
    async def publish(self) -> None:
        """Tell every other worker to look at the due times again."""

    @abc.abstractmethod
    async def listen(self, on_wake: Callable[[], None], clock: Clock) -> None:
        """Call `on_wake` for every other worker's publish, until cancelled.
        Also calls it after (re)connecting, since nudges sent while not
        listening are lost. Never raises for a lost connection: retries."""


class Wake:
    """Set by a producer (a reminder or follow-up was stored); the sleeper
    waits on `event` and clears it when it looks again."""

    def __init__(self, channel: WakeChannel | None = None) -> None:
        self.event = asyncio.Event()
        self._channel = channel
        self._publishing: set[asyncio.Task[None]] = set()

    def __call__(self) -> None:
        self.event.set()
        if self._channel is not None:
            task = asyncio.get_running_loop().create_task(self._publish(self._channel))
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)

    def local(self) -> None:
        """Wake this worker's sleeper only (a nudge from another worker)."""
        self.event.set()

    async def listen(self, clock: Clock) -> None:
        """Hear the other workers' nudges until cancelled (no-op without a channel)."""
        if self._channel is not None:
            await self._channel.listen(self.local, clock)

    async def _publish(self, channel: WakeChannel) -> None:
        try:
            await channel.publish()
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "wake_not_published",
                error=repr(exc),
                action="other workers see the new due time at their next look; "
                "check the database connection if this repeats",
            )
