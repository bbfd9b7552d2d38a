"""ReminderStore in SQL written once.

Each state change is a single UPDATE … RETURNING whose WHERE names the state
it starts from, so it is its own transaction and exactly one of two racing
callers (or workers) wins. A claim picks its row through a sub-select ending
in the dialect's `skip_locked`: PostgreSQL passes over a row another worker
is claiming right now (and re-checks the WHERE on the row it locks); SQLite's
one writer already excludes every other claimer.

Due work is found through the reminders_due index (SQLite: status,
next_fire_at; PostgreSQL: next_fire_at where active and unclaimed): due
queries repeat `_READY` and bound or order by next_fire_at, so they walk only
the due end of the rows that can fire.

SQLite's columns are not typed, so a row may not read back as a Reminder: it
is reported and left out (and, when due, marked failed) so one damaged row
never hides the others. PostgreSQL's typed columns always read back.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from core.logs import event
from core.reminders.limits import TooManyReminders
from core.reminders.model import NewReminder, Reminder, Status, new_reminder_id
from core.reminders.store import Claim, ReminderStore
from core.store.dialect import Dialect, placeholders
from core.store.sql.database import Database, Row, Transaction

log = logging.getLogger("kept.reminders")

# In the field order of the Reminder dataclass, which _reminder relies on.
_COLUMN_NAMES = (
    "id", "agent_id", "session_key", "platform", "chat_id", "thread_id", "created_by",
    "text", "kind", "cron", "timezone", "next_fire_at", "status", "claimed_at",
    "last_fired_at", "attempts", "last_error", "created_at", "updated_at",
)  # fmt: skip
_COLUMNS = ", ".join(_COLUMN_NAMES)
_TIMES = {"next_fire_at", "claimed_at", "last_fired_at", "created_at", "updated_at"}
_TIME_COLUMNS = frozenset(i for i, name in enumerate(_COLUMN_NAMES) if name in _TIMES)
# A (48-bit, vanishingly rare) id collision inserts nothing: a new id is drawn.
_INSERT = (
    f"INSERT INTO reminders({_COLUMNS}) VALUES ({placeholders(len(_COLUMN_NAMES))}) "
    f"ON CONFLICT (id) DO NOTHING RETURNING {_COLUMNS}"
)
# Names "reminders" among the locks writers take (Transaction.serialize).
REMINDERS_NAMESPACE = 0x6B6D  # "km"
# A user's reminders waiting to fire, whatever chat or agent they were set in.
COUNT_ACTIVE_SQL = (
    "SELECT count(*) FROM reminders WHERE platform = ? AND created_by = ? AND status = 'active'"
)
# The ready-to-fire condition, written out the same way everywhere so the
# planner always sees the reminders_due index.
_READY = "status = 'active' AND claimed_at IS NULL"
_ERROR_CHARS = 500
# Ends a claim: every claim column goes, so no later statement sees a leftover.
_NO_CLAIM = "claimed_at = NULL, claim_phase = NULL, claimed_by = NULL, lease_until = NULL"
# The fence: the claimant and the attempt it claimed.
_OURS = "claimed_by = ? AND attempts = ?"


def _move_on(ended: str, next_fire_at: Any) -> tuple[str, tuple[Any, ...]]:
    """The SET terms (and parameters) for the outcome of a send: a one-shot
    reminder (no next time) ends as `ended`, a recurring one moves on; a
    reminder cancelled meanwhile keeps `cancelled` and its time."""
    if next_fire_at is None:
        return f"status = CASE WHEN status <> 'active' THEN status ELSE '{ended}' END", ()
    return (
        "next_fire_at = CASE WHEN status = 'active' THEN ? ELSE next_fire_at END",
        (next_fire_at,),
    )


def _claim_fence(claim: Claim | None) -> tuple[str, tuple[object, ...]]:
    """The WHERE clause (and its parameters) holding a write to `claim`."""
    if claim is None:
        return "", ()
    return f"AND {_OURS} ", (claim.worker, claim.attempts)


class SqlReminderStore(ReminderStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d: Dialect = db.dialect

    # --- rows ------------------------------------------------------------------------

    def _reminder(self, row: Row) -> Reminder:
        t = self._d.from_maybe_time
        return Reminder(*(t(v) if i in _TIME_COLUMNS else v for i, v in enumerate(row)))

    def _readable(self, rows: Sequence[Row]) -> list[Reminder]:
        """Rows as records; a row that cannot be read is reported and left out."""
        found: list[Reminder] = []
        for raw in rows:
            try:
                found.append(self._reminder(raw))
            except Exception as exc:
                event(
                    log,
                    logging.ERROR,
                    "reminder_row_unreadable",
                    reminder=raw[0],
                    error=repr(exc),
                    action="inspect or delete this row in the reminders table",
                )
        return found

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Reminder]:
        return self._readable(await self._db.query(sql, params))

    async def _write_rows(self, sql: str, params: Sequence[Any]) -> list[Reminder]:
        return [self._reminder(r) for r in await self._db.execute(sql, params)]

    async def _update_one(self, sql: str, params: Sequence[Any]) -> Reminder | None:
        rows = await self._write_rows(sql, params)
        return rows[0] if rows else None

    # --- WHERE terms -----------------------------------------------------------------

    def _in(self, column: str, values: Collection[str] | None) -> tuple[str, list[Any]]:
        """`column IN (?, …)`; every row for None, none for an empty collection."""
        if values is None:
            return self._d.true, []
        items = sorted(set(values))
        if not items:
            return self._d.false, []
        return f"{column} IN ({placeholders(len(items))})", list(items)

    def _scope(
        self, agent_id: str | None, session_key: str | None, created_by: str | None = None
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = [self._d.true]
        params: list[Any] = []
        for column, value in (
            ("agent_id", agent_id),
            ("session_key", session_key),
            ("created_by", created_by),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        return " AND ".join(clauses), params

    # --- create / read / cancel ------------------------------------------------------

    def _values(self, new: NewReminder) -> tuple[Any, ...]:
        d = self._d
        now = d.time(new.created_at)
        return (
            new_reminder_id(),
            new.agent_id,
            new.session_key,
            new.target.platform,
            new.target.chat_id,
            new.target.thread_id,
            new.created_by,
            new.text,
            new.kind,
            new.cron,
            new.timezone,
            d.time(new.next_fire_at),
            "active",
            None,  # claimed_at
            None,  # last_fired_at
            0,
            None,  # last_error
            now,
            now,
        )

    async def add(self, new: NewReminder, *, max_active: int | None = None) -> Reminder:
        if max_active is None or new.created_by is None:
            for _ in range(3):
                added = await self._update_one(_INSERT, self._values(new))
                if added is not None:
                    return added
            raise RuntimeError("three reminder id collisions in a row")
        creator = (new.target.platform, new.created_by)

        async def work(tx: Transaction) -> Reminder | int:
            # Every creation by this user takes the same lock before counting,
            # so the count it reads is still true when its insert commits.
            await tx.serialize(REMINDERS_NAMESPACE, ":".join(creator))
            counted = await tx.fetchone(COUNT_ACTIVE_SQL, creator)
            active = int(counted[0]) if counted is not None else 0
            if active >= max_active:
                return active
            for _ in range(3):
                row = await tx.fetchone(_INSERT, self._values(new))
                if row is not None:
                    return self._reminder(row)
            raise RuntimeError("three reminder id collisions in a row")

        added = await self._db.transact(work)
        if isinstance(added, int):
            raise TooManyReminders(max_active, added)
        return added

    async def get(
        self,
        reminder_id: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        clause, params = self._scope(agent_id, session_key, created_by)
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE id = ? AND {clause}", [reminder_id, *params]
        )
        return rows[0] if rows else None

    async def list_for_session(
        self,
        agent_id: str,
        session_key: str,
        *,
        statuses: Collection[Status] | None = ("active",),
        created_by: str | None = None,
    ) -> list[Reminder]:
        clause, params = self._in("status", statuses)
        owner, owner_params = self._scope(None, None, created_by)
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE session_key = ? AND agent_id = ? "
            f"AND {clause} AND {owner} ORDER BY next_fire_at, id",
            [session_key, agent_id, *params, *owner_params],
        )

    async def list_all(
        self, *, statuses: Collection[Status] | None = None, limit: int | None = None
    ) -> list[Reminder]:
        clause, params = self._in("status", statuses)
        sql = f"SELECT {_COLUMNS} FROM reminders WHERE {clause} ORDER BY next_fire_at, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return await self._rows(sql, params)

    async def cancel(
        self,
        reminder_id: str,
        *,
        now: datetime,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        clause, params = self._scope(agent_id, session_key, created_by)
        return await self._update_one(
            "UPDATE reminders SET status = 'cancelled', updated_at = ? "
            f"WHERE id = ? AND status = 'active' AND {clause} RETURNING {_COLUMNS}",
            [self._d.time(now), reminder_id, *params],
        )

    # --- firing ------------------------------------------------------------------------

    async def next_due(self, *, platforms: Collection[str] | None = None) -> datetime | None:
        clause, params = self._in("platform", platforms)
        rows = await self._db.query(
            f"SELECT next_fire_at FROM reminders WHERE {_READY} AND {clause} "
            "ORDER BY next_fire_at LIMIT 1",
            params,
        )
        return self._d.from_time(rows[0][0]) if rows else None

    async def due(
        self, now: datetime, limit: int = 100, *, platforms: Collection[str] | None = None
    ) -> list[Reminder]:
        clause, params = self._in("platform", platforms)
        raw = await self._db.query(
            f"SELECT {_COLUMNS} FROM reminders WHERE {_READY} AND next_fire_at <= ? "
            # No tie-break on id: the index's order alone lets the walk stop
            # at the limit.
            f"AND {clause} ORDER BY next_fire_at LIMIT ?",
            [self._d.time(now), *params, limit],
        )
        found: list[Reminder] = []
        for row in raw:
            try:
                found.append(self._reminder(row))
            except Exception as exc:
                # Left as it is, an unreadable due row would come back on every
                # pass and keep the scheduler awake; mark it failed instead.
                await self._quarantine(row[0], now, f"unreadable row: {exc!r}")
        return found

    async def _quarantine(self, reminder_id: Any, now: datetime, error: str) -> None:
        event(
            log,
            logging.ERROR,
            "reminder_broken",
            reminder=reminder_id,
            error=error,
            action="inspect or delete this row in the reminders table",
        )
        await self._db.execute(
            f"UPDATE reminders SET status = 'failed', {_NO_CLAIM}, last_error = ?, "
            "updated_at = ? WHERE id = ?",
            (error[:_ERROR_CHARS], self._d.time(now), reminder_id),
        )

    async def claim(
        self, reminder_id: str, now: datetime, *, worker: str, lease_until: datetime
    ) -> Reminder | None:
        d = self._d
        at = d.time(now)
        return await self._update_one(
            "UPDATE reminders SET claimed_at = ?, claim_phase = 'claimed', claimed_by = ?, "
            "lease_until = ?, attempts = attempts + 1, updated_at = ? "
            f"WHERE id = (SELECT id FROM reminders WHERE id = ? AND {_READY} "
            f"AND next_fire_at <= ?{d.skip_locked}) RETURNING {_COLUMNS}",
            (at, worker, d.time(lease_until), at, reminder_id, at),
        )

    async def begin_sending(
        self, claimed: Reminder, *, worker: str, now: datetime, lease_until: datetime
    ) -> Reminder | None:
        d = self._d
        return await self._update_one(
            "UPDATE reminders SET claim_phase = 'sending', lease_until = ?, updated_at = ? "
            f"WHERE id = ? AND {_OURS} AND claim_phase = 'claimed' AND lease_until > ? "
            f"AND status = 'active' RETURNING {_COLUMNS}",
            (d.time(lease_until), d.time(now), claimed.id, worker, claimed.attempts, d.time(now)),
        )

    async def release(
        self, claimed: Reminder, *, worker: str, now: datetime, error: str
    ) -> Reminder | None:
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE id = ? AND {_OURS} AND claim_phase = 'claimed' RETURNING {_COLUMNS}",
            (error[:_ERROR_CHARS], self._d.time(now), claimed.id, worker, claimed.attempts),
        )

    async def release_expired_claims(self, now: datetime) -> list[Reminder]:
        d = self._d
        return await self._write_rows(
            f"UPDATE reminders SET {_NO_CLAIM}, updated_at = ? "
            "WHERE id IN (SELECT id FROM reminders WHERE claim_phase = 'claimed' "
            f"AND lease_until <= ?{d.skip_locked}) RETURNING {_COLUMNS}",
            (d.time(now), d.time(now)),
        )

    async def expired_sends(self, now: datetime) -> list[Reminder]:
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE claim_phase = 'sending' "
            "AND lease_until <= ? ORDER BY lease_until",
            (self._d.time(now),),
        )

    async def fail_expired_send(
        self,
        expired: Reminder,
        *,
        now: datetime,
        error: str,
        next_fire_at: datetime | None = None,
    ) -> Reminder | None:
        d = self._d
        move, moved = _move_on("failed", d.maybe_time(next_fire_at))
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_error = ?, updated_at = ?, {move} "
            "WHERE id = ? AND attempts = ? AND claim_phase = 'sending' AND lease_until <= ? "
            f"RETURNING {_COLUMNS}",
            (error[:_ERROR_CHARS], d.time(now), *moved, expired.id, expired.attempts, d.time(now)),
        )

    async def next_lease_expiry(self) -> datetime | None:
        rows = await self._db.query(
            "SELECT min(lease_until) FROM reminders WHERE claim_phase IS NOT NULL"
        )
        return self._d.from_maybe_time(rows[0][0]) if rows else None

    async def mark_fired(
        self,
        reminder_id: str,
        *,
        now: datetime,
        next_fire_at: datetime | None,
        claim: Claim | None = None,
    ) -> Reminder | None:
        # A reminder cancelled while its send was in flight keeps `cancelled`
        # (and is not moved on), but the send is still recorded.
        d = self._d
        move, moved = _move_on("done", d.maybe_time(next_fire_at))
        fence, fenced = _claim_fence(claim)
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_fired_at = ?, last_error = NULL, "
            f"updated_at = ?, {move} WHERE id = ? {fence}RETURNING {_COLUMNS}",
            (d.time(now), d.time(now), *moved, reminder_id, *fenced),
        )

    async def mark_failed(
        self,
        reminder_id: str,
        *,
        now: datetime,
        error: str,
        next_fire_at: datetime | None = None,
        claim: Claim | None = None,
    ) -> Reminder | None:
        d = self._d
        move, moved = _move_on("failed", d.maybe_time(next_fire_at))
        fence, fenced = _claim_fence(claim)
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_error = ?, updated_at = ?, {move} "
            f"WHERE id = ? {fence}RETURNING {_COLUMNS}",
            (error[:_ERROR_CHARS], d.time(now), *moved, reminder_id, *fenced),
        )

    async def skip(
        self, reminder_id: str, *, now: datetime, expected: datetime, next_fire_at: datetime
    ) -> Reminder | None:
        d = self._d
        return await self._update_one(
            "UPDATE reminders SET next_fire_at = ?, updated_at = ? "
            f"WHERE id = ? AND {_READY} AND next_fire_at = ? RETURNING {_COLUMNS}",
            (d.time(next_fire_at), d.time(now), reminder_id, d.time(expected)),
        )

    async def claimed(self) -> list[Reminder]:
        # The small partial lease index is the way in, not every active row
        # through reminders_due.
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE claim_phase IS NOT NULL "
            f"AND {self._d.unindexed('status')} = 'active' ORDER BY lease_until"
        )

    async def snooze_fired(
        self,
        reminder_id: str,
        *,
        firing: int,
        until: datetime,
        now: datetime,
        agent_id: str | None = None,
        session_key: str | None = None,
    ) -> Reminder | None:
        d = self._d
        clause, params = self._scope(agent_id, session_key)
        # updated_at moves past last_fired_at even within the same
        # millisecond: it is what marks this firing as snoozed.
        after = f"last_fired_at + {d.millisecond}"
        return await self._update_one(
            "UPDATE reminders SET status = 'active', next_fire_at = ?, "
            f"updated_at = CASE WHEN ? > {after} THEN ? ELSE {after} END "
            "WHERE id = ? AND attempts = ? AND claimed_at IS NULL "
            "AND last_fired_at IS NOT NULL AND updated_at = last_fired_at "
            "AND ((cron IS NULL AND status = 'done') "
            "OR (cron IS NOT NULL AND status = 'active' AND next_fire_at > ?)) "
            f"AND {clause} RETURNING {_COLUMNS}",
            [d.time(until), d.time(now), d.time(now), reminder_id, firing, d.time(until), *params],
        )
