"""Wake: the nudge from whoever stores new timed work to the loop that
sleeps until its next due time.

Made first in the composition root and handed to both sides as a
constructor argument, so no service is patched after it is built."""

from __future__ import annotations

import asyncio


class Wake:
    """Set by a producer (a reminder or follow-up was stored); the sleeper
    waits on `event` and clears it when it looks again."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __call__(self) -> None:
        self.event.set()
