"""UpdateQueue on PostgreSQL: the updates the polling worker hands to every
worker (core/store/updates.py).

A chat (the column `lane`) belongs to whoever holds a live claim on its
oldest waiting row, its head. Claiming locks head rows with `FOR UPDATE SKIP
LOCKED`, so two workers claiming at once never take one chat: the second
skips a head the first has locked, and once the first commits, the
re-checked head is under a live claim. Only the holder of a head claims the
rest of its chat, and the head stays under its claim until the chat's rows
are done, one after another.

Writes are durable (`synchronous_commit` on): once `put` returns, the poller
may confirm the updates to the platform. `put` notifies on CHANNEL in its
transaction, so listeners hear of rows only once they are committed.
LISTEN needs a connection of its own, outside the pool, held while listening.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime

import psycopg
from psycopg import AsyncConnection

from core.store.dialect import POSTGRES
from core.store.postgres.connection import PostgresConnection, notifications
from core.store.updates import DONE_RETENTION, NewUpdate, QueuedUpdate, UpdateQueue

CHANNEL = "kept_update_queue"

_PUT = (
    "INSERT INTO update_queue (source, update_id, lane, payload, created_at) "
    "SELECT %s, u.update_id, u.lane, u.payload, %s "
    "FROM unnest(%s::bigint[], %s::text[], %s::text[]) WITH ORDINALITY "
    "AS u(update_id, lane, payload, n) ORDER BY u.n "
    "ON CONFLICT (source, update_id) DO NOTHING"
)

# Heads: each chat's oldest waiting row. A chat is taken through its head
# only, so a live claim on the head keeps the whole chat with one worker.
_CLAIM = """
WITH heads AS (
    SELECT DISTINCT ON (lane) id FROM update_queue
    WHERE source = %(source)s AND done_at IS NULL
    ORDER BY lane, id
), chats AS (
    SELECT q.lane FROM update_queue q JOIN heads h ON q.id = h.id
    WHERE q.done_at IS NULL AND (q.claimed_by IS NULL OR q.lease_until <= %(now)s)
    ORDER BY q.id
    LIMIT %(chats)s
    FOR UPDATE OF q SKIP LOCKED
)
UPDATE update_queue u SET claimed_by = %(worker)s, lease_until = %(until)s
WHERE u.source = %(source)s AND u.done_at IS NULL AND u.lane IN (SELECT lane FROM chats)
RETURNING u.id, u.update_id, u.lane, u.payload
"""


class PostgresUpdateQueue(UpdateQueue):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db
        self._listeners: set[AsyncConnection[tuple[object, ...]]] = set()

    async def put(self, source: str, updates: Sequence[NewUpdate], *, now: datetime) -> int:
        if not updates:
            return 0
        ordered = sorted({u.update_id: u for u in updates}.values(), key=lambda u: u.update_id)
        async with self._db.transaction() as conn:
            await conn.execute(
                "DELETE FROM update_queue WHERE source = %s AND done_at < %s",
                (source, POSTGRES.time(now) - DONE_RETENTION),
            )
            cursor = await conn.execute(
                _PUT,
                (
                    source,
                    POSTGRES.time(now),
                    [u.update_id for u in ordered],
                    [u.chat_key for u in ordered],
                    [u.payload for u in ordered],
                ),
            )
            new = cursor.rowcount
            if new:
                # Delivered at commit: a listener never looks for rows before
                # they are there.
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, source))
        return new

    async def claim(
        self,
        source: str,
        *,
        worker: str,
        now: datetime,
        lease_until: datetime,
        chats: int,
    ) -> list[QueuedUpdate]:
        params = {
            "source": source,
            "worker": worker,
            "now": POSTGRES.time(now),
            "until": POSTGRES.time(lease_until),
            "chats": chats,
        }
        rows = await self._db.write(_CLAIM, params)
        found = [QueuedUpdate(int(r[0]), int(r[1]), r[2], r[3]) for r in rows]
        return sorted(found, key=lambda u: u.id)

    async def renew(self, ids: Sequence[int], *, worker: str, lease_until: datetime) -> list[int]:
        if not ids:
            return []
        rows = await self._db.write(
            "UPDATE update_queue SET lease_until = %s "
            "WHERE claimed_by = %s AND done_at IS NULL AND id = ANY(%s) RETURNING id",
            (POSTGRES.time(lease_until), worker, list(ids)),
        )
        return sorted(int(r[0]) for r in rows)

    async def done(self, ids: Sequence[int], *, now: datetime) -> None:
        if not ids:
            return
        # Not fenced on the claimant: an update made safe twice (a lease that
        # ran out under a live worker) is done either way.
        await self._db.write(
            "UPDATE update_queue SET done_at = %s, payload = '', claimed_by = NULL, "
            "lease_until = NULL WHERE id = ANY(%s) AND done_at IS NULL",
            (POSTGRES.time(now), list(ids)),
        )

    async def release(self, *, worker: str) -> int:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE update_queue SET claimed_by = NULL, lease_until = NULL "
                "WHERE claimed_by = %s AND done_at IS NULL RETURNING source",
                (worker,),
            )
            sources = {r[0] for r in await cursor.fetchall()}
            for source in sorted(sources):
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, source))
        return cursor.rowcount

    async def listen(self, source: str, on_put: Callable[[], None]) -> None:
        conn: AsyncConnection[tuple[object, ...]] = await AsyncConnection.connect(
            self._db.url, autocommit=True, prepare_threshold=None
        )
        self._listeners.add(conn)
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
            on_put()  # what was put before we listened
            async for put_source in notifications(conn):
                if put_source == source:
                    on_put()
            # Ends without an error only when the connection is closed (close()).
        finally:
            self._listeners.discard(conn)
            with suppress(psycopg.Error):
                # Shielded: a cancelled listener still gives its connection back.
                await asyncio.shield(conn.close())

    async def close(self) -> None:
        for conn in list(self._listeners):
            with suppress(psycopg.Error):
                await conn.close()
