"""UserZoneStore in SQL written once: one row per (platform, user id) in
`user_zones`."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from core.store.dialect import Dialect
from core.store.sql.database import Database
from core.users.store import UserKey, UserZone, UserZoneStore

# Two parameters a user: 400 users stay below every SQLite build's limit on
# host parameters (999 before 3.32) and PostgreSQL's (65,535).
_CHUNK = 400


class SqlUserZoneStore(UserZoneStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d: Dialect = db.dialect

    async def set_zone(
        self, platform: str, user_id: str, timezone: str, *, now: datetime
    ) -> UserZone:
        rows = await self._db.execute(
            "INSERT INTO user_zones (platform, user_id, timezone, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (platform, user_id) DO UPDATE SET "
            "timezone = excluded.timezone, updated_at = excluded.updated_at "
            "RETURNING updated_at",
            (platform, user_id, timezone, self._d.time(now)),
        )
        return UserZone(platform, user_id, timezone, self._d.from_time(rows[0][0]))

    async def zone(self, platform: str, user_id: str) -> UserZone | None:
        rows = await self._db.query(
            "SELECT timezone, updated_at FROM user_zones WHERE platform = ? AND user_id = ?",
            (platform, user_id),
        )
        if not rows:
            return None
        return UserZone(platform, user_id, rows[0][0], self._d.from_time(rows[0][1]))

    async def zones(self, users: Collection[UserKey]) -> dict[UserKey, str]:
        wanted = list(dict.fromkeys(users))
        found: dict[UserKey, str] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            # Pairs of equalities, not `(platform, user_id) IN (VALUES …)`:
            # SQLite answers those by scanning the table.
            pairs = " OR ".join("(platform = ? AND user_id = ?)" for _ in chunk)
            rows = await self._db.query(
                f"SELECT platform, user_id, timezone FROM user_zones WHERE {pairs}",
                tuple(value for key in chunk for value in key),
            )
            found.update({(r[0], r[1]): r[2] for r in rows})
        return found

    async def clear_zone(self, platform: str, user_id: str) -> bool:
        rows = await self._db.execute(
            "DELETE FROM user_zones WHERE platform = ? AND user_id = ? RETURNING 1",
            (platform, user_id),
        )
        return bool(rows)
