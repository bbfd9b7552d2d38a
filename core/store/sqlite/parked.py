"""ParkedUpdates on SQLite: one row per parked update in `parked_updates`."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from core.store.parked import ParkedUpdate, ParkedUpdates
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms

_COLUMNS = "source, update_id, lane, payload, error, tries, parked_at, retry_requested_at"


def _parked(row: sqlite3.Row | tuple[Any, ...]) -> ParkedUpdate:
    *head, parked_at, retry = tuple(row)
    return ParkedUpdate(*head, from_ms(parked_at), None if retry is None else from_ms(retry))


class SqliteParkedUpdates(ParkedUpdates):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def park(self, update: ParkedUpdate) -> None:
        values = (
            update.source,
            update.update_id,
            update.lane,
            update.payload,
            update.error,
            update.tries,
            to_ms(update.parked_at),
        )

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                f"INSERT INTO parked_updates ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL) "
                "ON CONFLICT (source, update_id) DO UPDATE SET error = excluded.error, "
                "tries = parked_updates.tries + excluded.tries, "
                "parked_at = excluded.parked_at, retry_requested_at = NULL",
                values,
            )

        await self._store._write(work)

    async def listing(self, *, limit: int = 100) -> list[ParkedUpdate]:
        rows = await self._store._fetch(
            f"SELECT {_COLUMNS} FROM parked_updates ORDER BY parked_at, update_id LIMIT ?",
            (limit,),
        )
        return [_parked(row) for row in rows]

    async def count(self) -> int:
        rows = await self._store._fetch("SELECT count(*) FROM parked_updates")
        return int(rows[0][0])

    async def request_retry(self, *, now: datetime) -> int:
        now_ms = to_ms(now)

        def work(db: sqlite3.Connection) -> int:
            db.execute(
                "UPDATE parked_updates SET retry_requested_at = ? WHERE retry_requested_at IS NULL",
                (now_ms,),
            )
            (count,) = db.execute(
                "SELECT count(*) FROM parked_updates WHERE retry_requested_at IS NOT NULL"
            ).fetchone()
            return int(count)

        return await self._store._write(work)

    async def take_retries(self, source: str, *, limit: int = 100) -> list[ParkedUpdate]:
        def work(db: sqlite3.Connection) -> list[ParkedUpdate]:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM parked_updates "
                "WHERE source = ? AND retry_requested_at IS NOT NULL "
                "ORDER BY parked_at, update_id LIMIT ?",
                (source, limit),
            ).fetchall()
            db.executemany(
                "UPDATE parked_updates SET retry_requested_at = NULL "
                "WHERE source = ? AND update_id = ?",
                [(source, row[1]) for row in rows],
            )
            return [_parked(row) for row in rows]

        return await self._store._write(work)

    async def resolve(self, source: str, update_id: int) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "DELETE FROM parked_updates WHERE source = ? AND update_id = ?",
                (source, update_id),
            )

        await self._store._write(work)
