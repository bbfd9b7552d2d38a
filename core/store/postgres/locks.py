"""The session guard on PostgreSQL: a chat's turn runs on one worker at a
time, across every worker on the database (core/locks.py SessionGuard).

Session-level advisory locks on one connection of the worker's own, outside
the pool: a lock is held for a whole turn (model call included) without
holding a transaction or a pooled connection open, and a worker that dies
drops its connection, which frees its locks at once. Waiting is a try-lock
retried with a short backoff, so the shared connection never blocks on one
session while others are asked for.

If that connection breaks while locks are held, PostgreSQL has already freed
them: the turns in flight finish unguarded (each message is still answered
once, checked under the next lock), and the next `hold` reconnects.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import psycopg
from psycopg import AsyncConnection

from core.logs import event

log = logging.getLogger("kept.store")

# Advisory lock namespaces (the two-int form's first int), every one kept
# uses: session turns, roles only one worker may hold, a session's due
# follow-ups while one statement claims them (due_claims.py), a session's
# extraction results while they are applied (sql/commitments.py), a
# platform's pairing requests while one is added (sql/pairing.py), a
# user's rows while they are erased (sql/erasure.py), and a user's active
# reminders while one more is added (sql/reminders.py).
SESSION_NAMESPACE = 0x6B70  # "kp"
ROLE_NAMESPACE = 0x6B72  # "kr"
CLAIM_NAMESPACE = 0x6B64  # "kd"
EXTRACTION_NAMESPACE = 0x6B63  # "kc"
PAIRING_NAMESPACE = 0x6B61  # "ka"
ERASURE_NAMESPACE = 0x6B65  # "ke"
REMINDERS_NAMESPACE = 0x6B6D  # "km"
FIRST_RETRY = 0.005
MAX_RETRY = 0.1


def session_lock_id(session_key: str) -> int:
    """A stable 32-bit id for a session key (a collision only makes two chats
    take turns, never lets one chat run twice)."""
    digest = hashlib.blake2b(session_key.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresSessionGuard:
    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: AsyncConnection[tuple[object, ...]] | None = None
        self._connecting = asyncio.Lock()
        self._roles: set[str] = set()  # held on the current connection

    async def _connection(self) -> AsyncConnection[tuple[object, ...]]:
        async with self._connecting:
            if self._conn is None or self._conn.closed:
                self._conn = await AsyncConnection.connect(
                    self._url, autocommit=True, prepare_threshold=None
                )
            return self._conn

    async def _try(self, lock_id: int) -> bool:
        conn = await self._connection()
        try:
            cursor = await conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (SESSION_NAMESPACE, lock_id)
            )
        except psycopg.OperationalError:
            await self._drop(conn)
            raise
        row = await cursor.fetchone()
        return bool(row and row[0])

    async def _unlock(self, lock_id: int) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return  # the connection went, and its locks with it
        try:
            await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SESSION_NAMESPACE, lock_id))
        except psycopg.Error as exc:
            event(
                log,
                logging.WARNING,
                "session_unlock_failed",
                error=repr(exc),
                action="none: the lock went with the broken connection",
            )
            await self._drop(conn)

    async def _drop(self, conn: AsyncConnection[tuple[object, ...]]) -> None:
        if self._conn is conn:
            self._conn = None
            self._roles.clear()  # they went with the connection
        with suppress(psycopg.Error):
            await conn.close()

    @asynccontextmanager
    async def hold(self, session_key: str) -> AsyncIterator[None]:
        lock_id = session_lock_id(session_key)
        delay = FIRST_RETRY
        while not await self._try(lock_id):
            await asyncio.sleep(delay)  # real time: another worker's turn
            delay = min(delay * 2, MAX_RETRY)
        try:
            yield
        finally:
            # Shielded: a cancelled turn must still free the chat for others.
            await asyncio.shield(self._unlock(lock_id))

    @asynccontextmanager
    async def try_hold(self, session_key: str) -> AsyncIterator[bool]:
        lock_id = session_lock_id(session_key)
        held = await self._try(lock_id)
        try:
            yield held
        finally:
            if held:
                await asyncio.shield(self._unlock(lock_id))

    async def try_lead(self, role: str) -> bool:
        try:
            conn = await self._connection()
            if role in self._roles:
                await conn.execute("SELECT 1")  # still connected: still held
                return True
            cursor = await conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (ROLE_NAMESPACE, session_lock_id(role))
            )
            row = await cursor.fetchone()
        except psycopg.Error as exc:
            event(
                log,
                logging.WARNING,
                "leadership_check_failed",
                role=role,
                error=repr(exc),
                action="check the database; another worker takes the role over meanwhile",
            )
            if self._conn is not None:
                await self._drop(self._conn)
            return False
        if row and row[0]:
            self._roles.add(role)
            return True
        return False

    async def resign(self, role: str) -> None:
        if role not in self._roles:
            return
        self._roles.discard(role)
        conn = self._conn
        if conn is not None and not conn.closed:
            with suppress(psycopg.Error):
                await conn.execute(
                    "SELECT pg_advisory_unlock(%s, %s)", (ROLE_NAMESPACE, session_lock_id(role))
                )

    async def close(self) -> None:
        self._roles.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(psycopg.Error):
                await conn.close()
