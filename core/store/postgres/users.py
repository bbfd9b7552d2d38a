"""UserZoneStore on PostgreSQL."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from core.store.postgres.claims import aware
from core.store.postgres.connection import PostgresConnection
from core.users.store import UserKey, UserZone, UserZoneStore


class PostgresUserZoneStore(UserZoneStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def set_zone(
        self, platform: str, user_id: str, timezone: str, *, now: datetime
    ) -> UserZone:
        rows = await self._db.write(
            "INSERT INTO user_zones (platform, user_id, timezone, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (platform, user_id) DO UPDATE SET "
            "timezone = EXCLUDED.timezone, updated_at = EXCLUDED.updated_at "
            "RETURNING updated_at",
            (platform, user_id, timezone, aware(now)),
        )
        return UserZone(platform, user_id, timezone, rows[0][0])

    async def zone(self, platform: str, user_id: str) -> UserZone | None:
        rows = await self._db.fetchall(
            "SELECT timezone, updated_at FROM user_zones WHERE platform = %s AND user_id = %s",
            (platform, user_id),
        )
        return UserZone(platform, user_id, rows[0][0], rows[0][1]) if rows else None

    async def zones(self, users: Collection[UserKey]) -> dict[UserKey, str]:
        wanted = list(dict.fromkeys(users))
        if not wanted:
            return {}
        rows = await self._db.fetchall(
            "SELECT z.platform, z.user_id, z.timezone FROM user_zones z "
            "JOIN unnest(%s::text[], %s::text[]) AS w(platform, user_id) "
            "ON z.platform = w.platform AND z.user_id = w.user_id",
            ([p for p, _ in wanted], [u for _, u in wanted]),
        )
        return {(r[0], r[1]): r[2] for r in rows}

    async def clear_zone(self, platform: str, user_id: str) -> bool:
        rows = await self._db.write(
            "DELETE FROM user_zones WHERE platform = %s AND user_id = %s RETURNING 1",
            (platform, user_id),
        )
        return bool(rows)
