"""PairingStore on PostgreSQL. A new request is decided under a
transaction-scoped advisory lock, so workers answering two strangers at once
never both see room below the bound on pending requests."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.pairing.store import PairedUser, PairingRequest, PairingStore
from core.store.postgres.claims import aware
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.locks import PAIRING_NAMESPACE

_REQUEST_COLUMNS = "platform, user_id, code, username, created_at, expires_at"


def _request(row: tuple[Any, ...]) -> PairingRequest:
    return PairingRequest(*row)


class PostgresPairingStore(PairingStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

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
        async with self._db.transaction() as conn:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (PAIRING_NAMESPACE, platform)
            )
            await conn.execute("DELETE FROM pairing_requests WHERE expires_at <= %s", (aware(now),))
            cursor = await conn.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests "
                "WHERE platform = %s AND user_id = %s",
                (platform, user_id),
            )
            row = await cursor.fetchone()
            if row is not None:
                return _request(tuple(row))
            cursor = await conn.execute(
                "SELECT count(*) FROM pairing_requests WHERE platform = %s", (platform,)
            )
            counted = await cursor.fetchone()
            if counted is not None and counted[0] >= max_pending:
                return None
            cursor = await conn.execute(
                f"INSERT INTO pairing_requests ({_REQUEST_COLUMNS}) "
                f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_REQUEST_COLUMNS}",
                (platform, user_id, code, username, aware(now), aware(expires_at)),
            )
            inserted = await cursor.fetchone()
            assert inserted is not None
            return _request(tuple(inserted))

    async def approve(self, code: str, *, now: datetime) -> PairedUser | None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM pairing_requests WHERE code = %s AND expires_at > %s "
                "RETURNING platform, user_id, username",
                (code, aware(now)),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            platform, user_id, username = tuple(row)
            cursor = await conn.execute(
                "INSERT INTO paired_users (platform, user_id, username, approved_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (platform, user_id) "
                "DO UPDATE SET username = paired_users.username RETURNING approved_at",
                (platform, user_id, username, aware(now)),
            )
            approved = await cursor.fetchone()
            assert approved is not None
            return PairedUser(platform, user_id, username, approved[0])

    async def revoke(self, platform: str, user_id: str) -> bool:
        key = (platform, user_id)
        async with self._db.transaction() as conn:
            await conn.execute(
                "DELETE FROM pairing_requests WHERE platform = %s AND user_id = %s", key
            )
            cursor = await conn.execute(
                "DELETE FROM paired_users WHERE platform = %s AND user_id = %s RETURNING 1", key
            )
            return await cursor.fetchone() is not None

    async def is_paired(self, platform: str, user_id: str) -> bool:
        rows = await self._db.fetchall(
            "SELECT 1 FROM paired_users WHERE platform = %s AND user_id = %s",
            (platform, user_id),
        )
        return bool(rows)

    async def pending(self, *, now: datetime) -> list[PairingRequest]:
        rows = await self._db.fetchall(
            f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE expires_at > %s "
            "ORDER BY created_at, platform, user_id",
            (aware(now),),
        )
        return [_request(tuple(row)) for row in rows]

    async def paired(self) -> list[PairedUser]:
        rows = await self._db.fetchall(
            "SELECT platform, user_id, username, approved_at FROM paired_users "
            "ORDER BY approved_at, platform, user_id"
        )
        return [PairedUser(*row) for row in rows]
