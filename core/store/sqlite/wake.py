"""The wake channel on SQLite: another process's commit wakes this one.

One process serves a SQLite bot, but the operator's CLI (`kept commitments
snooze`, a second process) writes to the same file, and a follow-up it
reopens may be due before the time the bot's heartbeat sleeps until.
SQLite has no notifications; `PRAGMA data_version` changes on a connection
whenever a commit from any other connection lands, so the listener reads
it every POLL_SECONDS (one cheap read, no table touched) and wakes the
sleeper when it moved. Publishing needs nothing: the commit is the nudge.
The process's own bulk connection (imports) also moves it; a spare look
at the due times is all that costs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.clock import Clock
from core.logs import event
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.driver import sqlite3
from core.wake import WakeChannel

log = logging.getLogger("kept.store")

POLL_SECONDS = 2.0


class SqliteWakeChannel(WakeChannel):
    def __init__(self, db: SqliteConnection, *, poll_seconds: float = POLL_SECONDS) -> None:
        self._db = db
        self._poll = poll_seconds
        self.heard = 0  # other connections' commits that woke the sleeper

    async def publish(self) -> None:
        """Nothing to send: a commit moves every other connection's data_version."""

    async def listen(self, on_wake: Callable[[], None], clock: Clock) -> None:
        seen: int | None = None
        failing = False
        while True:
            try:
                rows = await self._db.fetchall("PRAGMA data_version")
                version = int(rows[0][0])
                failing = False
            except (sqlite3.Error, RuntimeError) as exc:  # closed or unreadable: look again
                if not failing:
                    event(
                        log,
                        logging.WARNING,
                        "wake_listener_lost",
                        error=repr(exc),
                        action="changes made by `kept` commands wait for the heartbeat's "
                        "next look; check the database file if this repeats",
                    )
                failing = True
                await clock.sleep(self._poll)
                continue
            if seen is not None and version != seen:
                self.heard += 1
                on_wake()
            seen = version
            await clock.sleep(self._poll)
