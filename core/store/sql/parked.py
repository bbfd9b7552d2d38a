"""ParkedUpdates in SQL written once: one row per parked update in
`parked_updates`, shared by every worker (any of them may take a replay)."""

from __future__ import annotations

from datetime import datetime

from core.store.dialect import Dialect
from core.store.parked import ParkedUpdate, ParkedUpdates
from core.store.sql.database import Database, Row, Transaction

_COLUMN_NAMES = (
    "source", "update_id", "lane", "payload", "error", "tries", "parked_at", "retry_requested_at",
)  # fmt: skip
_COLUMNS = ", ".join(_COLUMN_NAMES)
_QUEUE_ORDER = "ORDER BY parked_at, update_id"
# The replays of one source asked for and not taken yet, oldest first.
_ASKED = (
    f"SELECT {_COLUMNS} FROM parked_updates "
    "WHERE source = ? AND retry_requested_at IS NOT NULL "
    f"{_QUEUE_ORDER} LIMIT ?"
)


class SqlParkedUpdates(ParkedUpdates):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d: Dialect = db.dialect

    def _parked(self, row: Row) -> ParkedUpdate:
        *head, parked_at, retry = row
        d = self._d
        return ParkedUpdate(*head, d.from_time(parked_at), d.from_maybe_time(retry))

    async def park(self, update: ParkedUpdate) -> None:
        await self._db.execute(
            f"INSERT INTO parked_updates ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL) "
            "ON CONFLICT (source, update_id) DO UPDATE SET error = excluded.error, "
            "tries = parked_updates.tries + excluded.tries, "
            "parked_at = excluded.parked_at, retry_requested_at = NULL",
            (
                update.source,
                update.update_id,
                update.chat_key,
                update.payload,
                update.error,
                update.tries,
                self._d.time(update.parked_at),
            ),
        )

    async def listing(self, *, limit: int = 100) -> list[ParkedUpdate]:
        rows = await self._db.query(
            f"SELECT {_COLUMNS} FROM parked_updates {_QUEUE_ORDER} LIMIT ?", (limit,)
        )
        return [self._parked(row) for row in rows]

    async def count(self) -> int:
        rows = await self._db.query("SELECT count(*) FROM parked_updates")
        return int(rows[0][0])

    async def request_retry(self, *, now: datetime) -> int:
        at = self._d.time(now)

        async def work(tx: Transaction) -> int:
            await tx.execute(
                "UPDATE parked_updates SET retry_requested_at = ? WHERE retry_requested_at IS NULL",
                (at,),
            )
            row = await tx.fetchone(
                "SELECT count(*) FROM parked_updates WHERE retry_requested_at IS NOT NULL"
            )
            return int(row[0]) if row is not None else 0

        return await self._db.transact(work)

    async def take_retries(self, source: str, *, limit: int = 100) -> list[ParkedUpdate]:
        d = self._d
        if d.returning_from:
            # One statement: two workers asking at once never take the same
            # row, and the rows come back with the request they carried.
            taken = ", ".join(f"taken.{name}" for name in _COLUMN_NAMES)
            rows = await self._db.execute(
                "UPDATE parked_updates SET retry_requested_at = NULL "
                f"FROM ({_ASKED}{d.skip_locked}) AS taken "
                "WHERE parked_updates.source = taken.source "
                f"AND parked_updates.update_id = taken.update_id RETURNING {taken}",
                (source, limit),
            )
        else:

            async def work(tx: Transaction) -> list[Row]:
                # One writer at a time: read, then clear, in one transaction.
                asked = await tx.fetchall(_ASKED, (source, limit))
                await tx.executemany(
                    "UPDATE parked_updates SET retry_requested_at = NULL "
                    "WHERE source = ? AND update_id = ?",
                    [(source, row[1]) for row in asked],
                )
                return asked

            rows = await self._db.transact(work)
        parked = [self._parked(row) for row in rows]
        return sorted(parked, key=lambda p: (p.parked_at, p.update_id))

    async def resolve(self, source: str, update_id: int) -> None:
        await self._db.execute(
            "DELETE FROM parked_updates WHERE source = ? AND update_id = ?", (source, update_id)
        )
