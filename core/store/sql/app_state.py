"""The AppStateStore in SQL written once: one row per key in `app_state`,
shared by every worker of the database."""

from __future__ import annotations

from core.store.app_state import AppStateStore
from core.store.sql.database import Database


class SqlAppStateStore(AppStateStore):
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, key: str) -> str | None:
        rows = await self._db.query("SELECT value FROM app_state WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    async def put(self, key: str, value: str) -> None:
        await self._db.execute(
            "INSERT INTO app_state (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
