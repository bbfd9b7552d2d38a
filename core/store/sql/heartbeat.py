"""HeartbeatStore in SQL written once: delivery claims of commitments, for
one process or several workers on one database.

- A claim picks its rows in a SELECT that PostgreSQL runs `FOR UPDATE SKIP
  LOCKED` (`Dialect.skip_locked`): a row another worker is claiming right
  now is passed over, not waited on, and two workers never claim one row.
  SQLite has one writer at a time, so its transaction already excludes every
  other claimer.
- `begin_sending` and every step after it are fenced on the claimant (worker
  id) and the attempt it claimed, so a claim that expired and was taken
  again by someone else is never moved or ended by its first owner.
- Claims and status changes commit durably.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from core.commitments.model import Commitment, Scope
from core.heartbeat.store import Final, HeartbeatStore, ReapedClaims
from core.store.dialect import Dialect
from core.store.sql.commitments import (
    ACTIVE,
    COLUMNS,
    NO_CLAIM,
    commitment,
    scope_match,
    scope_params,
)
from core.store.sql.database import Database, Params, Row, Transaction
from core.store.sql.silenced import SILENCED

_UNKNOWN_AFTER_RESTART = "delivery outcome unknown (process stopped mid-send); not resent"
_EXPIRED_BEFORE_SEND = "claim expired before sending (process stopped); released, nothing sent"
# Claims the rows of `picked` (a WITH query of ids): claimed_at, claimed_by,
# lease_until, updated_at.
_CLAIM_PICKED = (
    "UPDATE commitments SET claimed_at = ?, claim_phase = 'claimed', claimed_by = ?, "
    "lease_until = ?, attempts = attempts + 1, updated_at = ? "
    f"WHERE id IN (SELECT id FROM picked) RETURNING {COLUMNS}"
)


class DuePicker(Protocol):
    """Picks, in one statement, each scope's first `per_scope` due and
    unclaimed commitments, where a database can do it for many scopes at
    once: a `WITH … picked AS (SELECT id …)` prefix and its parameters
    (`now` as the dialect stores it), claimed by the statement it leads."""

    def __call__(
        self, scopes: Sequence[Scope], *, per_scope: int, now: Any
    ) -> tuple[str, Params]: ...


class _FenceLost(Exception):
    """A claim is no longer ours (or no longer sendable): undo the transaction."""


class SqlHeartbeatStore(HeartbeatStore):
    """`pick_due`: how `claim_due` picks a page of scopes in one statement
    (PostgreSQL: core/store/postgres/due_claims.py, which keeps a chat whole
    while another worker claims it); None: scope by scope in one
    transaction, which SQLite's one writer keeps whole."""

    def __init__(self, db: Database, *, pick_due: DuePicker | None = None) -> None:
        self._db = db
        self._d: Dialect = db.dialect
        self._pick_due = pick_due
        self._pick_scope = (
            f"WITH picked AS (SELECT id FROM commitments WHERE {scope_match(self._d)} "
            f"AND {ACTIVE} AND due_earliest <= ? AND due_latest >= ? AND claimed_at IS NULL "
            f"ORDER BY due_earliest, id LIMIT ?{self._d.skip_locked}) {_CLAIM_PICKED}"
        )

    def _row(self, row: Row) -> Commitment:
        return commitment(self._d, row)

    def _fence(self, claimed: Sequence[Commitment], worker: str) -> tuple[str, tuple[Any, ...]]:
        """Our claims: the worker, and each row at the attempt it was claimed
        with (the id list walks the primary key; the pairs check attempts)."""
        listed, ids = self._d.in_list(list(dict.fromkeys(c.id for c in claimed)))
        pairs = ", ".join("(?, ?)" for _ in claimed)
        attempts = tuple(v for c in claimed for v in (c.id, c.attempts))
        sql = f"claimed_by = ? AND id {listed} AND (id, attempts) IN (VALUES {pairs})"
        return sql, (worker, *ids, *attempts)

    async def due_unclaimed(
        self, *, now: datetime, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Commitment]:
        # Walks the partial commitments_due index up to `now`; claimed rows are
        # the few in flight, filtered on the way.
        at = self._d.time(now)
        page, params = "", [at, at]
        if after is not None:
            page = "AND (due_earliest, id) > (?, ?) "
            params += [self._d.time(after[0]), after[1]]
        rows = await self._db.query(
            f"SELECT {COLUMNS} FROM commitments WHERE {ACTIVE} AND due_earliest <= ? "
            f"AND due_latest >= ? AND claimed_at IS NULL {page}"
            "ORDER BY due_earliest, id LIMIT ?",
            (*params, limit),
        )
        return [self._row(r) for r in rows]

    async def next_due_after(self, now: datetime) -> datetime | None:
        rows = await self._db.query(
            f"SELECT min(due_earliest) FROM commitments WHERE {ACTIVE} AND due_earliest > ?",
            (self._d.time(now),),
        )
        return self._d.from_maybe_time(rows[0][0]) if rows else None

    async def claim(
        self, ids: Sequence[str], *, worker: str, now: datetime, lease_until: datetime
    ) -> list[Commitment]:
        if not ids:
            return []
        d = self._d
        listed, params = d.in_list(ids)
        at = d.time(now)
        # The pick re-checks its WHERE on each row it locks, so a row claimed
        # meanwhile is never taken twice.
        rows = await self._db.execute(
            f"WITH picked AS (SELECT id FROM commitments WHERE id {listed} AND {ACTIVE} "
            f"AND claimed_at IS NULL ORDER BY id{d.skip_locked}) {_CLAIM_PICKED}",
            (*params, at, worker, d.time(lease_until), at),
        )
        order = {cid: i for i, cid in enumerate(ids)}
        return sorted((self._row(r) for r in rows), key=lambda c: order[c.id])

    async def claim_due(
        self,
        scopes: Sequence[Scope],
        *,
        per_scope: int,
        worker: str,
        now: datetime,
        lease_until: datetime,
    ) -> list[Commitment]:
        if not scopes:
            return []
        d = self._d
        at = d.time(now)
        claim = (at, worker, d.time(lease_until), at)
        if self._pick_due is not None:
            pick, params = self._pick_due(scopes, per_scope=per_scope, now=at)
            rows = await self._db.execute(f"{pick} {_CLAIM_PICKED}", (*params, *claim))
        else:

            async def work(tx: Transaction) -> list[Row]:
                found: list[Row] = []
                for scope in scopes:
                    params = (*scope_params(scope), at, at, per_scope, *claim)
                    found += await tx.fetchall(self._pick_scope, params)
                return found

            rows = await self._db.transact(work)
        order = {scope: i for i, scope in enumerate(scopes)}
        claimed = [self._row(r) for r in rows]
        return sorted(claimed, key=lambda c: (order.get(c.scope, -1), c.due_earliest, c.id))

    async def begin_sending(
        self,
        claimed: Sequence[Commitment],
        *,
        worker: str,
        now: datetime,
        lease_until: datetime,
    ) -> bool:
        if not claimed:
            return False
        d = self._d
        at = d.time(now)
        fence, fenced = self._fence(claimed, worker)
        sql = (
            "UPDATE commitments SET claim_phase = 'sending', lease_until = ?, updated_at = ? "
            f"WHERE {fence} AND claim_phase = 'claimed' AND lease_until > ? "
            f"AND {ACTIVE} AND due_earliest <= ? "
            # Switched off while the model wrote: not sent, by any worker.
            f"AND NOT {SILENCED}"
        )
        params = (d.time(lease_until), at, *fenced, at, at)
        wanted = len({c.id for c in claimed})

        async def work(tx: Transaction) -> None:
            if await tx.execute(sql, params) != wanted:
                raise _FenceLost  # rolls the whole move back: all or nothing

        try:
            await self._db.transact(work)
        except _FenceLost:
            return False
        return True

    async def release(
        self, claimed: Sequence[Commitment], *, worker: str, now: datetime, error: str
    ) -> None:
        if not claimed:
            return
        fence, fenced = self._fence(claimed, worker)
        await self._db.execute(
            f"UPDATE commitments SET {NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE {fence} AND claim_phase = 'claimed'",
            (error, self._d.time(now), *fenced),
        )

    async def finish(
        self,
        claimed: Sequence[Commitment],
        status: Final,
        *,
        worker: str,
        now: datetime,
        message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        if not claimed:
            return
        # A send is stamped even on a row the user dismissed meanwhile: it
        # happened, and it counts toward the daily cap.
        stamp = {
            "sent": "sent_at = ?, ",
            "dismissed": f"dismissed_at = CASE WHEN {ACTIVE} THEN ? ELSE dismissed_at END, ",
            "failed": "",
        }[status]
        at = self._d.time(now)
        stamped = () if status == "failed" else (at,)
        fence, fenced = self._fence(claimed, worker)
        await self._db.execute(
            f"UPDATE commitments SET status = CASE WHEN {ACTIVE} THEN ? ELSE status END, "
            f"{stamp}sent_message_id = coalesce(?, sent_message_id), {NO_CLAIM}, "
            f"last_error = ?, updated_at = ? WHERE {fence} AND claim_phase IS NOT NULL",
            (status, *stamped, message_id, error, at, *fenced),
        )

    async def reap_expired_claims(self, *, now: datetime) -> ReapedClaims:
        # Rows locked right now (their owner is finishing them) are skipped
        # on PostgreSQL: a later pass sees what that owner left.
        expired = (
            "WITH expired AS (SELECT id FROM commitments WHERE claim_phase = ? "
            f"AND lease_until <= ?{self._d.skip_locked}) "
        )
        release = (
            f"{expired}UPDATE commitments SET {NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE id IN (SELECT id FROM expired) RETURNING {COLUMNS}"
        )
        fail = (
            f"{expired}UPDATE commitments SET "
            f"status = CASE WHEN {ACTIVE} THEN 'failed' ELSE status END, "
            f"{NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE id IN (SELECT id FROM expired) RETURNING {COLUMNS}"
        )
        at = self._d.time(now)

        async def work(tx: Transaction) -> ReapedClaims:
            released = await tx.fetchall(release, ("claimed", at, _EXPIRED_BEFORE_SEND, at))
            failed = await tx.fetchall(fail, ("sending", at, _UNKNOWN_AFTER_RESTART, at))
            return ReapedClaims([self._row(r) for r in released], [self._row(r) for r in failed])

        return await self._db.transact(work)

    async def next_lease_expiry(self) -> datetime | None:
        rows = await self._db.query(
            "SELECT min(lease_until) FROM commitments WHERE claim_phase IS NOT NULL"
        )
        return self._d.from_maybe_time(rows[0][0]) if rows else None

    async def record_turn_unless_recent(
        self, agent_id: str, session_key: str, *, now: datetime, every: timedelta
    ) -> datetime | None:
        d = self._d
        recorded = await self._db.execute(
            "INSERT INTO heartbeat_turns(agent_id, session_key, last_turn_at) "
            "VALUES (?, ?, ?) ON CONFLICT (session_key, agent_id) "
            "DO UPDATE SET last_turn_at = excluded.last_turn_at "
            "WHERE heartbeat_turns.last_turn_at <= ? RETURNING last_turn_at",
            (agent_id, session_key, d.time(now), d.time(now - every)),
        )
        if recorded:
            return None
        rows = await self._db.query(
            "SELECT last_turn_at FROM heartbeat_turns WHERE session_key = ? AND agent_id = ?",
            (session_key, agent_id),
        )
        # Gone meanwhile (the session was deleted): nothing to wait for.
        return d.from_time(rows[0][0]) if rows else now

    async def last_turns(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], datetime]:
        if not keys:
            return {}
        pairs = ", ".join("(?, ?)" for _ in keys)
        rows = await self._db.query(
            "SELECT agent_id, session_key, last_turn_at FROM heartbeat_turns "
            f"WHERE (agent_id, session_key) IN (VALUES {pairs})",
            [part for key in keys for part in key],
        )
        return {(r[0], r[1]): self._d.from_time(r[2]) for r in rows}

    async def sent_times_since(
        self, agent_id: str, session_key: str, since: datetime
    ) -> list[datetime]:
        # One statement on the commitments_sent index (agent, session, sent_at).
        rows = await self._db.query(
            "SELECT sent_at FROM commitments WHERE agent_id = ? AND session_key = ? "
            "AND sent_at >= ? ORDER BY sent_at",
            (agent_id, session_key, self._d.time(since)),
        )
        return [self._d.from_time(r[0]) for r in rows]

    async def recent_checkin_texts(self, session_key: str, since: datetime) -> list[str]:
        rows = await self._db.query(
            "SELECT m.text FROM sessions s JOIN messages m ON m.session_id = s.id "
            f"WHERE s.key = ? AND m.kind = 'checkin' AND m.ts >= ? AND m.active = {self._d.true}",
            (session_key, self._d.time(since)),
        )
        return [r[0] for r in rows]

    async def dismiss_silenced(
        self, ids: Sequence[str], *, now: datetime, reason: str
    ) -> list[str]:
        if not ids:
            return []
        listed, params = self._d.in_list(list(dict.fromkeys(ids)))
        at = self._d.time(now)
        rows = await self._db.execute(
            "UPDATE commitments SET status = 'dismissed', dismissed_at = ?, updated_at = ?, "
            f"last_error = ? WHERE id {listed} AND {ACTIVE} AND claimed_at IS NULL "
            f"AND {SILENCED} RETURNING id",
            (at, at, reason, *params),
        )
        return [r[0] for r in rows]
