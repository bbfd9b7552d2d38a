"""PairingStore in SQL written once. A new request is decided in one write
transaction serialised per platform (`Transaction.serialize`: PostgreSQL's
transaction-scoped advisory lock; SQLite's one writer), so two workers
answering two strangers at once never both see room below the bound on
pending requests, nor both send one stranger's notice. A stranger whose
notice is not due is answered from one read, without the lock."""

from __future__ import annotations

from datetime import datetime, timedelta

from core.pairing.store import (
    BlockedUser,
    Blocking,
    PairedUser,
    PairingOffer,
    PairingRequest,
    PairingStore,
    Standing,
)
from core.store.dialect import Dialect
from core.store.sql.database import Database, Row, Transaction

# Names "pairing" among the locks writers take (Transaction.serialize).
PAIRING_NAMESPACE = 0x6B61  # "ka"

_REQUEST_COLUMNS = "platform, user_id, code, username, created_at, expires_at"
_BLOCK_COLUMNS = "platform, user_id, username, blocked_at"


def _due(notified: datetime | None, due: datetime | None) -> bool:
    """Whether the notice is to be sent: `due` is the latest moment a
    previous notice may have been sent for a new one to go out (None: the
    caller records no notice)."""
    return due is not None and (notified is None or notified <= due)


class SqlPairingStore(PairingStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d: Dialect = db.dialect

    def _request(self, row: Row) -> PairingRequest:
        platform, user_id, code, username, created, expires = row[:6]
        t = self._d.from_time
        return PairingRequest(platform, user_id, code, username, t(created), t(expires))

    def _blocked(self, row: Row) -> BlockedUser:
        platform, user_id, username, blocked_at = row
        return BlockedUser(platform, user_id, username, self._d.from_time(blocked_at))

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
        d = self._d
        at = d.time(now)
        due = now - notify_every if notify_every is not None else None
        key = (platform, user_id)
        # A pending request exists only for a user who is not blocked (block
        # drops it; the insert below checks), so this read decides alone.
        rows = await self._db.query(
            f"SELECT {_REQUEST_COLUMNS}, notified_at FROM pairing_requests "
            "WHERE platform = ? AND user_id = ? AND expires_at > ?",
            (*key, at),
        )
        if rows and not _due(d.from_maybe_time(rows[0][6]), due):
            return PairingOffer(self._request(rows[0]), notify=False)

        async def work(tx: Transaction) -> PairingOffer | None:
            await tx.serialize(PAIRING_NAMESPACE, platform)
            await tx.execute("DELETE FROM pairing_requests WHERE expires_at <= ?", (at,))
            if await tx.fetchone(
                "SELECT 1 FROM pairing_blocks WHERE platform = ? AND user_id = ?", key
            ):
                return None
            row = await tx.fetchone(
                f"SELECT {_REQUEST_COLUMNS}, notified_at FROM pairing_requests "
                "WHERE platform = ? AND user_id = ?",
                key,
            )
            if row is not None:
                if not _due(d.from_maybe_time(row[6]), due):
                    return PairingOffer(self._request(row), notify=False)
                await tx.execute(
                    "UPDATE pairing_requests SET notified_at = ? "
                    "WHERE platform = ? AND user_id = ?",
                    (at, *key),
                )
                return PairingOffer(self._request(row), notify=True)
            counted = await tx.fetchone(
                "SELECT count(*) FROM pairing_requests WHERE platform = ?", (platform,)
            )
            count = counted[0] if counted is not None else 0
            if count >= max_pending:
                # The oldest give way: a newcomer is never refused.
                await tx.execute(
                    "DELETE FROM pairing_requests WHERE platform = ? AND user_id IN ("
                    " SELECT user_id FROM pairing_requests WHERE platform = ?"
                    " ORDER BY created_at, user_id LIMIT ?)",
                    (platform, platform, count - max_pending + 1),
                )
            notified = at if due is not None else None
            inserted = await tx.fetchone(
                f"INSERT INTO pairing_requests ({_REQUEST_COLUMNS}, notified_at) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {_REQUEST_COLUMNS}",
                (*key, code, username, at, d.time(expires_at), notified),
            )
            assert inserted is not None
            return PairingOffer(self._request(inserted), notify=notified is not None)

        return await self._db.transact(work)

    async def approve(self, code: str, *, now: datetime) -> PairedUser | None:
        at = self._d.time(now)

        async def work(tx: Transaction) -> PairedUser | None:
            row = await tx.fetchone(
                "DELETE FROM pairing_requests WHERE code = ? AND expires_at > ? "
                "RETURNING platform, user_id, username",
                (code, at),
            )
            if row is None:
                return None
            platform, user_id, username = row
            approved = await tx.fetchone(
                "INSERT INTO paired_users (platform, user_id, username, approved_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (platform, user_id) "
                "DO UPDATE SET username = paired_users.username RETURNING approved_at",
                (platform, user_id, username, at),
            )
            assert approved is not None
            return PairedUser(platform, user_id, username, self._d.from_time(approved[0]))

        return await self._db.transact(work)

    async def reject(self, code: str, *, now: datetime) -> PairingRequest | None:
        rows = await self._db.execute(
            f"DELETE FROM pairing_requests WHERE code = ? AND expires_at > ? "
            f"RETURNING {_REQUEST_COLUMNS}",
            (code, self._d.time(now)),
        )
        return self._request(rows[0]) if rows else None

    async def revoke(self, platform: str, user_id: str) -> bool:
        key = (platform, user_id)

        async def work(tx: Transaction) -> bool:
            await tx.execute("DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?", key)
            return (
                await tx.execute("DELETE FROM paired_users WHERE platform = ? AND user_id = ?", key)
                > 0
            )

        return await self._db.transact(work)

    async def block(
        self, platform: str, user_id: str, username: str | None, *, now: datetime
    ) -> Blocking:
        key = (platform, user_id)

        async def work(tx: Transaction) -> Blocking:
            # The same lock as `request`: no code is handed out meanwhile.
            await tx.serialize(PAIRING_NAMESPACE, platform)
            dropped = await tx.fetchall(
                "DELETE FROM pairing_requests WHERE platform = ? AND user_id = ? "
                "RETURNING code, username",
                key,
            )
            approved = await tx.fetchall(
                "DELETE FROM paired_users WHERE platform = ? AND user_id = ? RETURNING username",
                key,
            )
            known = [r[-1] for r in [*dropped, *approved] if r[-1]]
            await tx.execute(
                f"INSERT INTO pairing_blocks ({_BLOCK_COLUMNS}) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (platform, user_id) DO NOTHING",
                (*key, username or (known[0] if known else None), self._d.time(now)),
            )
            row = await tx.fetchone(
                f"SELECT {_BLOCK_COLUMNS} FROM pairing_blocks WHERE platform = ? AND user_id = ?",
                key,
            )
            assert row is not None
            return Blocking(self._blocked(row), tuple(r[0] for r in dropped), bool(approved))

        return await self._db.transact(work)

    async def unblock(self, platform: str, user_id: str) -> BlockedUser | None:
        rows = await self._db.execute(
            "DELETE FROM pairing_blocks WHERE platform = ? AND user_id = ? "
            f"RETURNING {_BLOCK_COLUMNS}",
            (platform, user_id),
        )
        return self._blocked(rows[0]) if rows else None

    async def standing(self, platform: str, user_id: str) -> Standing:
        key = (platform, user_id)
        [(blocked, approved)] = await self._db.query(
            "SELECT EXISTS (SELECT 1 FROM pairing_blocks WHERE platform = ? AND user_id = ?),"
            " EXISTS (SELECT 1 FROM paired_users WHERE platform = ? AND user_id = ?)",
            (*key, *key),
        )
        return "blocked" if blocked else "approved" if approved else "unknown"

    async def is_paired(self, platform: str, user_id: str) -> bool:
        rows = await self._db.query(
            "SELECT 1 FROM paired_users WHERE platform = ? AND user_id = ?", (platform, user_id)
        )
        return bool(rows)

    async def pending(self, *, now: datetime) -> list[PairingRequest]:
        rows = await self._db.query(
            f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE expires_at > ? "
            "ORDER BY created_at, platform, user_id",
            (self._d.time(now),),
        )
        return [self._request(row) for row in rows]

    async def paired(self) -> list[PairedUser]:
        rows = await self._db.query(
            "SELECT platform, user_id, username, approved_at FROM paired_users "
            "ORDER BY approved_at, platform, user_id"
        )
        t = self._d.from_time
        return [PairedUser(r[0], r[1], r[2], t(r[3])) for r in rows]

    async def blocked(self) -> list[BlockedUser]:
        rows = await self._db.query(
            f"SELECT {_BLOCK_COLUMNS} FROM pairing_blocks ORDER BY blocked_at, platform, user_id"
        )
        return [self._blocked(row) for row in rows]
