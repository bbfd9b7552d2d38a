"""PairingStore on PostgreSQL. A new request is decided under a
transaction-scoped advisory lock, so workers answering two strangers at once
never both see room below the bound on pending requests, nor both send one
stranger's notice. A stranger whose notice is not due is answered from one
read, without the lock."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from core.pairing.store import (
    BlockedUser,
    Blocking,
    PairedUser,
    PairingOffer,
    PairingRequest,
    PairingStore,
    Standing,
)
from core.store.postgres.claims import aware
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.locks import PAIRING_NAMESPACE

_REQUEST_COLUMNS = "platform, user_id, code, username, created_at, expires_at"
_BLOCK_COLUMNS = "platform, user_id, username, blocked_at"


def _request(row: tuple[Any, ...]) -> PairingRequest:
    return PairingRequest(*row[:6])


def _due(notified: datetime | None, due: datetime | None) -> bool:
    """Whether the notice is to be sent: `due` is the latest moment a
    previous notice may have been sent for a new one to go out (None: the
    caller records no notice)."""
    return due is not None and (notified is None or notified <= due)


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
        notify_every: timedelta | None,
    ) -> PairingOffer | None:
        due = aware(now) - notify_every if notify_every is not None else None
        key = (platform, user_id)
        # A pending request exists only for a user who is not blocked (block
        # drops it; the insert below checks), so this read decides alone.
        rows = await self._db.fetchall(
            f"SELECT {_REQUEST_COLUMNS}, notified_at FROM pairing_requests "
            "WHERE platform = %s AND user_id = %s AND expires_at > %s",
            (*key, aware(now)),
        )
        if rows and not _due(rows[0][6], due):
            return PairingOffer(_request(tuple(rows[0])), notify=False)
        async with self._db.transaction() as conn:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (PAIRING_NAMESPACE, platform)
            )
            await conn.execute("DELETE FROM pairing_requests WHERE expires_at <= %s", (aware(now),))
            cursor = await conn.execute(
                "SELECT 1 FROM pairing_blocks WHERE platform = %s AND user_id = %s", key
            )
            if await cursor.fetchone() is not None:
                return None
            cursor = await conn.execute(
                f"SELECT {_REQUEST_COLUMNS}, notified_at FROM pairing_requests "
                "WHERE platform = %s AND user_id = %s",
                key,
            )
            row = await cursor.fetchone()
            if row is not None:
                if not _due(row[6], due):
                    return PairingOffer(_request(tuple(row)), notify=False)
                await conn.execute(
                    "UPDATE pairing_requests SET notified_at = %s "
                    "WHERE platform = %s AND user_id = %s",
                    (aware(now), *key),
                )
                return PairingOffer(_request(tuple(row)), notify=True)
            cursor = await conn.execute(
                "SELECT count(*) FROM pairing_requests WHERE platform = %s", (platform,)
            )
            counted = await cursor.fetchone()
            count = counted[0] if counted is not None else 0
            if count >= max_pending:
                # The oldest give way: a newcomer is never refused.
                await conn.execute(
                    "DELETE FROM pairing_requests WHERE platform = %s AND user_id IN ("
                    " SELECT user_id FROM pairing_requests WHERE platform = %s"
                    " ORDER BY created_at, user_id LIMIT %s)",
                    (platform, platform, count - max_pending + 1),
                )
            notified = aware(now) if due is not None else None
            cursor = await conn.execute(
                f"INSERT INTO pairing_requests ({_REQUEST_COLUMNS}, notified_at) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {_REQUEST_COLUMNS}",
                (*key, code, username, aware(now), aware(expires_at), notified),
            )
            inserted = await cursor.fetchone()
            assert inserted is not None
            return PairingOffer(_request(tuple(inserted)), notify=notified is not None)

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

    async def reject(self, code: str, *, now: datetime) -> PairingRequest | None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM pairing_requests WHERE code = %s AND expires_at > %s "
                f"RETURNING {_REQUEST_COLUMNS}",
                (code, aware(now)),
            )
            row = await cursor.fetchone()
            return _request(tuple(row)) if row is not None else None

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

    async def block(
        self, platform: str, user_id: str, username: str | None, *, now: datetime
    ) -> Blocking:
        key = (platform, user_id)
        async with self._db.transaction() as conn:
            # The same lock as `request`: no code is handed out meanwhile.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (PAIRING_NAMESPACE, platform)
            )
            cursor = await conn.execute(
                "DELETE FROM pairing_requests WHERE platform = %s AND user_id = %s "
                "RETURNING code, username",
                key,
            )
            dropped = await cursor.fetchall()
            cursor = await conn.execute(
                "DELETE FROM paired_users WHERE platform = %s AND user_id = %s RETURNING username",
                key,
            )
            approved = await cursor.fetchall()
            known = [r[-1] for r in [*dropped, *approved] if r[-1]]
            await conn.execute(
                f"INSERT INTO pairing_blocks ({_BLOCK_COLUMNS}) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (platform, user_id) DO NOTHING",
                (*key, username or (known[0] if known else None), aware(now)),
            )
            cursor = await conn.execute(
                f"SELECT {_BLOCK_COLUMNS} FROM pairing_blocks WHERE platform = %s AND user_id = %s",
                key,
            )
            row = await cursor.fetchone()
            assert row is not None
            return Blocking(BlockedUser(*row), tuple(r[0] for r in dropped), bool(approved))

    async def unblock(self, platform: str, user_id: str) -> BlockedUser | None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM pairing_blocks WHERE platform = %s AND user_id = %s "
                f"RETURNING {_BLOCK_COLUMNS}",
                (platform, user_id),
            )
            row = await cursor.fetchone()
            return BlockedUser(*row) if row is not None else None

    async def standing(self, platform: str, user_id: str) -> Standing:
        key = (platform, user_id)
        [(blocked, approved)] = await self._db.fetchall(
            "SELECT EXISTS (SELECT 1 FROM pairing_blocks WHERE platform = %s AND user_id = %s),"
            " EXISTS (SELECT 1 FROM paired_users WHERE platform = %s AND user_id = %s)",
            (*key, *key),
        )
        return "blocked" if blocked else "approved" if approved else "unknown"

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

    async def blocked(self) -> list[BlockedUser]:
        rows = await self._db.fetchall(
            f"SELECT {_BLOCK_COLUMNS} FROM pairing_blocks ORDER BY blocked_at, platform, user_id"
        )
        return [BlockedUser(*row) for row in rows]
