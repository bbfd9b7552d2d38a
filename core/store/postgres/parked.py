"""ParkedUpdates on PostgreSQL: one row per parked update in
`parked_updates`, shared by every worker (any of them may take a replay)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.store.parked import ParkedUpdate, ParkedUpdates
from core.store.postgres.claims import aware
from core.store.postgres.connection import PostgresConnection

_COLUMNS = "source, update_id, lane, payload, error, tries, parked_at, retry_requested_at"


def _parked(row: tuple[Any, ...]) -> ParkedUpdate:
    return ParkedUpdate(*row)


class PostgresParkedUpdates(ParkedUpdates):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def park(self, update: ParkedUpdate) -> None:
        await self._db.write(
            f"INSERT INTO parked_updates ({_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, NULL) "
            "ON CONFLICT (source, update_id) DO UPDATE SET error = EXCLUDED.error, "
            "tries = parked_updates.tries + EXCLUDED.tries, "
            "parked_at = EXCLUDED.parked_at, retry_requested_at = NULL",
            (
                update.source,
                update.update_id,
                update.lane,
                update.payload,
                update.error,
                update.tries,
                aware(update.parked_at),
            ),
        )

    async def listing(self, *, limit: int = 100) -> list[ParkedUpdate]:
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM parked_updates ORDER BY parked_at, update_id LIMIT %s",
            (limit,),
        )
        return [_parked(row) for row in rows]

    async def count(self) -> int:
        rows = await self._db.fetchall("SELECT count(*) FROM parked_updates")
        return int(rows[0][0])

    async def request_retry(self, *, now: datetime) -> int:
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE parked_updates SET retry_requested_at = %s "
                "WHERE retry_requested_at IS NULL",
                (aware(now),),
            )
            cursor = await conn.execute(
                "SELECT count(*) FROM parked_updates WHERE retry_requested_at IS NOT NULL"
            )
            row = await cursor.fetchone()
        return int(row[0]) if row is not None else 0

    async def take_retries(self, source: str, *, limit: int = 100) -> list[ParkedUpdate]:
        # One statement: two workers asking at once never take the same row.
        rows = await self._db.write(
            "UPDATE parked_updates p SET retry_requested_at = NULL "
            "FROM (SELECT source, update_id, retry_requested_at FROM parked_updates "
            "      WHERE source = %s AND retry_requested_at IS NOT NULL "
            "      ORDER BY parked_at, update_id LIMIT %s FOR UPDATE SKIP LOCKED) AS taken "
            "WHERE p.source = taken.source AND p.update_id = taken.update_id "
            "RETURNING p.source, p.update_id, p.lane, p.payload, p.error, p.tries, "
            "p.parked_at, taken.retry_requested_at",
            (source, limit),
        )
        parked = [_parked(row) for row in rows]
        return sorted(parked, key=lambda p: (p.parked_at, p.update_id))

    async def resolve(self, source: str, update_id: int) -> None:
        await self._db.write(
            "DELETE FROM parked_updates WHERE source = %s AND update_id = %s",
            (source, update_id),
        )
