"""PairingStore on the shared SQLite connection (connection.py). Each change
is one BEGIN IMMEDIATE transaction, so the pending check and the insert it
decides on never interleave with another writer's."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from core.pairing.store import PairedUser, PairingRequest, PairingStore
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms

_REQUEST_COLUMNS = "platform, user_id, code, username, created_at, expires_at"


def _request(row: sqlite3.Row | tuple[Any, ...]) -> PairingRequest:
    platform, user_id, code, username, created, expires = tuple(row)
    return PairingRequest(platform, user_id, code, username, from_ms(created), from_ms(expires))


class SqlitePairingStore(PairingStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def request(
        self,
        platform: str,
        user_id: str,
        username: str | None,
        *,
        code: str,
        now: datetime,
        expires_at: datetime,
        max_pending: int,
    ) -> PairingRequest | None:
        now_ms, expires_ms = to_ms(now), to_ms(expires_at)

        def work(db: sqlite3.Connection) -> PairingRequest | None:
            db.execute("DELETE FROM pairing_requests WHERE expires_at <= ?", (now_ms,))
            row = db.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests "
                "WHERE platform = ? AND user_id = ?",
                (platform, user_id),
            ).fetchone()
            if row is not None:
                return _request(row)
            (count,) = db.execute(
                "SELECT count(*) FROM pairing_requests WHERE platform = ?", (platform,)
            ).fetchone()
            if count >= max_pending:
                return None
            values = (platform, user_id, code, username, now_ms, expires_ms)
            db.execute(
                f"INSERT INTO pairing_requests ({_REQUEST_COLUMNS}) VALUES (?,?,?,?,?,?)", values
            )
            return _request(values)

        return await self._store._write(work)

    async def approve(self, code: str, *, now: datetime) -> PairedUser | None:
        now_ms = to_ms(now)

        def work(db: sqlite3.Connection) -> PairedUser | None:
            row = db.execute(
                "DELETE FROM pairing_requests WHERE code = ? AND expires_at > ? "
                "RETURNING platform, user_id, username",
                (code, now_ms),
            ).fetchone()
            if row is None:
                return None
            platform, user_id, username = tuple(row)
            db.execute(
                "INSERT INTO paired_users (platform, user_id, username, approved_at) "
                "VALUES (?,?,?,?) ON CONFLICT (platform, user_id) DO NOTHING",
                (platform, user_id, username, now_ms),
            )
            return PairedUser(platform, user_id, username, from_ms(now_ms))

        return await self._store._write(work)

    async def revoke(self, platform: str, user_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            key = (platform, user_id)
            db.execute("DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?", key)
            cursor = db.execute("DELETE FROM paired_users WHERE platform = ? AND user_id = ?", key)
            return cursor.rowcount > 0

        return await self._store._write(work)

    async def is_paired(self, platform: str, user_id: str) -> bool:
        rows = await self._store._fetch(
            "SELECT 1 FROM paired_users WHERE platform = ? AND user_id = ?", (platform, user_id)
        )
        return bool(rows)

    async def pending(self, *, now: datetime) -> list[PairingRequest]:
        rows = await self._store._fetch(
            f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE expires_at > ? "
            "ORDER BY created_at, platform, user_id",
            (to_ms(now),),
        )
        return [_request(row) for row in rows]

    async def paired(self) -> list[PairedUser]:
        rows = await self._store._fetch(
            "SELECT platform, user_id, username, approved_at FROM paired_users "
            "ORDER BY approved_at, platform, user_id"
        )
        return [PairedUser(r[0], r[1], r[2], from_ms(r[3])) for r in rows]
