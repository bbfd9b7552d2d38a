"""The AppStateStore on PostgreSQL: one row per key in `app_state`, shared
by every worker of the database."""

from __future__ import annotations

from core.store.app_state import AppStateStore
from core.store.postgres.connection import PostgresConnection


class PostgresAppStateStore(AppStateStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def get(self, key: str) -> str | None:
        rows = await self._db.fetchall("SELECT value FROM app_state WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    async def put(self, key: str, value: str) -> None:
        await self._db.write(
            "INSERT INTO app_state (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (key, value),
        )
