"""PairingStore on the shared SQLite connection (connection.py). Each change
is one BEGIN IMMEDIATE transaction, so the pending check and the insert it
decides on never interleave with another writer's. A stranger whose notice
is not due is answered from one read, without taking the write lock."""

from __future__ import annotations

import sqlite3
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
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms

_REQUEST_COLUMNS = "platform, user_id, code, username, created_at, expires_at"


def _request(row: sqlite3.Row | tuple[Any, ...]) -> PairingRequest:
    platform, user_id, code, username, created, expires = tuple(row)[:6]
    return PairingRequest(platform, user_id, code, username, from_ms(created), from_ms(expires))


def _blocked(row: sqlite3.Row | tuple[Any, ...]) -> BlockedUser:
    platform, user_id, username, blocked_at = tuple(row)
    return BlockedUser(platform, user_id, username, from_ms(blocked_at))


def _due(notified_ms: int | None, due_ms: int | None) -> bool:
    """Whether the notice is to be sent: `due_ms` is the latest moment a
    previous notice may have been sent for a new one to go out (None: the
    caller records no notice)."""
    return due_ms is not None and (notified_ms is None or notified_ms <= due_ms)


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
        notify_every: timedelta | None,
    ) -> PairingOffer | None:
        now_ms, expires_ms = to_ms(now), to_ms(expires_at)
        due_ms = to_ms(now - notify_every) if notify_every is not None else None
        key = (platform, user_id)
        # A pending request exists only for a user who is not blocked (block
        # drops it; the insert below checks), so this read decides alone.
        rows = await self._store._fetch(
            f"SELECT {_REQUEST_COLUMNS}, notified_at FROM pairing_requests "
            "WHERE platform = ? AND user_id = ? AND expires_at > ?",
            (*key, now_ms),
        )
        if rows and not _due(rows[0][6], due_ms):
            return PairingOffer(_request(rows[0]), notify=False)

        def work(db: sqlite3.Connection) -> PairingOffer | None:
            db.execute("DELETE FROM pairing_requests WHERE expires_at <= ?", (now_ms,))
            if db.execute(
                "SELECT 1 FROM pairing_blocks WHERE platform = ? AND user_id = ?", key
            ).fetchone():
                return None
            row = db.execute(
                f"SELECT {_REQUEST_COLUMNS}, notified_at FROM pairing_requests "
                "WHERE platform = ? AND user_id = ?",
                key,
            ).fetchone()
            if row is not None:
                if not _due(row[6], due_ms):
                    return PairingOffer(_request(row), notify=False)
                db.execute(
                    "UPDATE pairing_requests SET notified_at = ? "
                    "WHERE platform = ? AND user_id = ?",
                    (now_ms, *key),
                )
                return PairingOffer(_request(row), notify=True)
            (count,) = db.execute(
                "SELECT count(*) FROM pairing_requests WHERE platform = ?", (platform,)
            ).fetchone()
            if count >= max_pending:
                # The oldest give way: a newcomer is never refused.
                db.execute(
                    "DELETE FROM pairing_requests WHERE platform = ? AND user_id IN ("
                    " SELECT user_id FROM pairing_requests WHERE platform = ?"
                    " ORDER BY created_at, user_id LIMIT ?)",
                    (platform, platform, count - max_pending + 1),
                )
            notified = now_ms if due_ms is not None else None
            values = (platform, user_id, code, username, now_ms, expires_ms)
            db.execute(
                f"INSERT INTO pairing_requests ({_REQUEST_COLUMNS}, notified_at) "
                "VALUES (?,?,?,?,?,?,?)",
                (*values, notified),
            )
            return PairingOffer(_request(values), notify=notified is not None)

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

    async def reject(self, code: str, *, now: datetime) -> PairingRequest | None:
        now_ms = to_ms(now)

        def work(db: sqlite3.Connection) -> PairingRequest | None:
            row = db.execute(
                f"DELETE FROM pairing_requests WHERE code = ? AND expires_at > ? "
                f"RETURNING {_REQUEST_COLUMNS}",
                (code, now_ms),
            ).fetchone()
            return _request(row) if row is not None else None

        return await self._store._write(work)

    async def revoke(self, platform: str, user_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            key = (platform, user_id)
            db.execute("DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?", key)
            cursor = db.execute("DELETE FROM paired_users WHERE platform = ? AND user_id = ?", key)
            return cursor.rowcount > 0

        return await self._store._write(work)

    async def block(
        self, platform: str, user_id: str, username: str | None, *, now: datetime
    ) -> Blocking:
        key = (platform, user_id)

        def work(db: sqlite3.Connection) -> Blocking:
            dropped = db.execute(
                "DELETE FROM pairing_requests WHERE platform = ? AND user_id = ? "
                "RETURNING code, username",
                key,
            ).fetchall()
            approved = db.execute(
                "DELETE FROM paired_users WHERE platform = ? AND user_id = ? RETURNING username",
                key,
            ).fetchall()
            known = [r[-1] for r in [*dropped, *approved] if r[-1]]
            db.execute(
                "INSERT INTO pairing_blocks (platform, user_id, username, blocked_at) "
                "VALUES (?,?,?,?) ON CONFLICT (platform, user_id) DO NOTHING",
                (*key, username or (known[0] if known else None), to_ms(now)),
            )
            row = db.execute(
                "SELECT platform, user_id, username, blocked_at FROM pairing_blocks "
                "WHERE platform = ? AND user_id = ?",
                key,
            ).fetchone()
            return Blocking(_blocked(row), tuple(r[0] for r in dropped), bool(approved))

        return await self._store._write(work)

    async def unblock(self, platform: str, user_id: str) -> BlockedUser | None:
        def work(db: sqlite3.Connection) -> BlockedUser | None:
            row = db.execute(
                "DELETE FROM pairing_blocks WHERE platform = ? AND user_id = ? "
                "RETURNING platform, user_id, username, blocked_at",
                (platform, user_id),
            ).fetchone()
            return _blocked(row) if row is not None else None

        return await self._store._write(work)

    async def standing(self, platform: str, user_id: str) -> Standing:
        key = (platform, user_id)
        [(blocked, approved)] = await self._store._fetch(
            "SELECT EXISTS (SELECT 1 FROM pairing_blocks WHERE platform = ? AND user_id = ?),"
            " EXISTS (SELECT 1 FROM paired_users WHERE platform = ? AND user_id = ?)",
            (*key, *key),
        )
        return "blocked" if blocked else "approved" if approved else "unknown"

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

    async def blocked(self) -> list[BlockedUser]:
        rows = await self._store._fetch(
            "SELECT platform, user_id, username, blocked_at FROM pairing_blocks "
            "ORDER BY blocked_at, platform, user_id"
        )
        return [_blocked(row) for row in rows]
