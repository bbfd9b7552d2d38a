"""The wake channel on PostgreSQL: LISTEN/NOTIFY between the workers of one
database (core/wake.py WakeChannel).

A worker that stored new timed work NOTIFYs after its write committed, so a
listener that wakes always finds the row. Each worker listens on one
connection of its own, outside the pool (a pooled connection would be
handed to others between notifications). The payload is the sender's id,
so a worker does not wake itself twice.

NOTIFY needs a session on the server: behind PgBouncer in transaction mode
LISTEN is not delivered, and the workers fall back to their capped sleep.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable

import psycopg
from psycopg import AsyncConnection

from core.clock import Clock
from core.logs import event
from core.store.errors import masked_url
from core.store.postgres.connection import PostgresConnection, notifications
from core.wake import WakeChannel

log = logging.getLogger("kept.store")

CHANNEL = "kept_wake"
FIRST_RETRY = 1.0
MAX_RETRY = 30.0


class PostgresWakeChannel(WakeChannel):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db
        self._id = secrets.token_hex(8)
        # Set while LISTEN is in place; nudges published before are not heard.
        self.listening = asyncio.Event()
        self.heard = 0  # other workers' nudges received

    async def publish(self) -> None:
        async with self._db.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self._id))

    async def listen(self, on_wake: Callable[[], None], clock: Clock) -> None:
        retry = FIRST_RETRY
        while True:
            try:
                async with await AsyncConnection.connect(self._db.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    retry = FIRST_RETRY
                    try:
                        # Nudges sent while this worker was not listening are lost.
                        on_wake()
                        await self._hear(conn, on_wake)
                    finally:
                        self.listening.clear()
            except (psycopg.Error, OSError) as exc:
                event(
                    log,
                    logging.WARNING,
                    "wake_listener_lost",
                    url=masked_url(self._db.url),
                    error=" ".join(str(exc).split()) or repr(exc),
                    retry_in=retry,
                    action="new follow-ups stored by other workers wait for this worker's "
                    "next look until the database is reachable again",
                )
                await clock.sleep(retry)
                retry = min(retry * 2, MAX_RETRY)

    async def _hear(
        self, conn: AsyncConnection[tuple[object, ...]], on_wake: Callable[[], None]
    ) -> None:
        async for sender in notifications(conn):
            if sender != self._id:
                self.heard += 1
                on_wake()
