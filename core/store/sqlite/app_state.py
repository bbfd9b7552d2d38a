"""The AppStateStore on SQLite: one row per key in `app_state`."""

from __future__ import annotations

import sqlite3

from core.store.app_state import AppStateStore
from core.store.sqlite.connection import SqliteConnection


class SqliteAppStateStore(AppStateStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def get(self, key: str) -> str | None:
        rows = await self._store._fetch("SELECT value FROM app_state WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    async def put(self, key: str, value: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO app_state (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

        await self._store._write(work)
