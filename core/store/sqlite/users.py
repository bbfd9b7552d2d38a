"""UserZoneStore on the shared SQLite connection (connection.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from datetime import datetime

from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms
from core.users.store import UserKey, UserZone, UserZoneStore

# SQLite's default limit on host parameters is 32,766; two per user.
_CHUNK = 400


class SqliteUserZoneStore(UserZoneStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def set_zone(
        self, platform: str, user_id: str, timezone: str, *, now: datetime
    ) -> UserZone:
        params = (platform, user_id, timezone, to_ms(now))

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO user_zones (platform, user_id, timezone, updated_at) "
                "VALUES (?,?,?,?) ON CONFLICT (platform, user_id) DO UPDATE SET "
                "timezone = excluded.timezone, updated_at = excluded.updated_at",
                params,
            )

        await self._store._write(work)
        return UserZone(platform, user_id, timezone, from_ms(to_ms(now)))

    async def zone(self, platform: str, user_id: str) -> UserZone | None:
        rows = await self._store._fetch(
            "SELECT timezone, updated_at FROM user_zones WHERE platform = ? AND user_id = ?",
            (platform, user_id),
        )
        if not rows:
            return None
        return UserZone(platform, user_id, rows[0][0], from_ms(rows[0][1]))

    async def zones(self, users: Collection[UserKey]) -> dict[UserKey, str]:
        wanted = list(dict.fromkeys(users))
        found: dict[UserKey, str] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            pairs = " OR ".join("(platform = ? AND user_id = ?)" for _ in chunk)
            rows = await self._store._fetch(
                f"SELECT platform, user_id, timezone FROM user_zones WHERE {pairs}",
                tuple(value for key in chunk for value in key),
            )
            found.update({(r[0], r[1]): r[2] for r in rows})
        return found

    async def clear_zone(self, platform: str, user_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "DELETE FROM user_zones WHERE platform = ? AND user_id = ?", (platform, user_id)
            )
            return cursor.rowcount > 0

        return await self._store._write(work)
