"""The RetentionStore in SQL written once.

Each batch picks its rows oldest first through an index (migration step 20),
at most `limit`, and deletes them in one short transaction: a message's
full-text row goes with it (SQLite's trigger, PostgreSQL's cascade), and the
backend's erasure purge runs in the same transaction (erasure.py's
`Purge`). Sessions stay, even left with no message: a session row holds no
text, and a running worker may hold its id for the chat's next message.

On PostgreSQL, where several workers may run the pass at once, the picking
SELECT ends in the dialect's `skip_locked`: two batches never pick the same
row, so they neither wait on each other nor count a row twice. Deleting a
message also writes to its replies (their `in_reply_to` becomes NULL), so a
batch first locks the replies of the messages it picked, passing over those
another batch holds, and leaves for a later batch the messages whose
replies it could not lock: it then never waits on a row another batch
holds, and two batches cannot deadlock. SQLite's one writer excludes every
other batch already (`skip_locked` is empty there).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from core.privacy.holdings import Reach, holdings
from core.privacy.store import RetainedKind, RetentionStore
from core.store.sql.database import Database, Row, Transaction
from core.store.sql.erasure import Purge

# The rows of each kind that retention may erase, as a WHERE term on the
# row's age column: the same terms as the partial indexes of step 20.
_ENDED_FOLLOW_UP = "status NOT IN ('pending', 'snoozed')"
_ENDED_REMINDER = "status <> 'active'"

# kind: (table, key column, age column, which rows of it may go)
_KINDS: dict[RetainedKind, tuple[str, str, str, str | None]] = {
    "messages": ("messages", "id", "ts", None),
    "queued": ("extraction_jobs", "id", "created_at", None),
    "follow_ups": ("commitments", "id", "updated_at", _ENDED_FOLLOW_UP),
    "reminders": ("reminders", "id", "updated_at", _ENDED_REMINDER),
}


class SqlRetentionStore(RetentionStore):
    def __init__(self, db: Database, purge: Purge) -> None:
        self._db = db
        self._d = db.dialect
        self._purge = purge
        backend = holdings(self._d.name)
        self._tables = {h.table for h in backend}
        # Where a message's words live besides the message (its index rows).
        self._derived = frozenset(h.table for h in backend if h.reach is Reach.MESSAGE)

    async def erase_batch(self, kind: RetainedKind, before: datetime, *, limit: int) -> int:
        if kind == "updates":
            work = self._updates
        elif kind == "messages":
            work = self._messages
        else:
            work = self._rows

        async def batch(tx: Transaction) -> int:
            return await work(tx, kind, before, limit)

        return await self._db.transact(batch, bulk=True)

    async def finish(self, kinds: Collection[RetainedKind]) -> None:
        tables = set()
        for kind in kinds:
            tables.add("parked_updates" if kind == "updates" else _KINDS[kind][0])
            if kind == "messages":
                tables |= self._derived
        touched = frozenset(t for t in tables if t in self._tables)
        if touched:
            await self._purge.after(touched)

    async def prune_counters(self, now: datetime) -> int:
        # Yesterday's budgets stay: a call held before midnight settles on
        # the day it was held.
        before_day = (now.astimezone(UTC) - timedelta(days=1)).date().isoformat()
        idle = self._d.time(now - timedelta(hours=1))

        async def work(tx: Transaction) -> int:
            days = await tx.execute("DELETE FROM token_budgets WHERE day < ?", (before_day,))
            return days + await tx.execute("DELETE FROM rate_windows WHERE tat < ?", (idle,))

        return await self._db.transact(work, durable=False)

    async def oldest_message(self) -> datetime | None:
        rows = await self._db.query("SELECT min(ts) FROM messages")
        return self._d.from_maybe_time(rows[0][0]) if rows else None

    async def _pick(
        self, tx: Transaction, kind: RetainedKind, before: datetime, limit: int
    ) -> list[Row]:
        table, key, age, which = _KINDS[kind]
        where = f"{which} AND {age} < ?" if which else f"{age} < ?"
        return await tx.fetchall(
            f"SELECT {key} FROM {table} WHERE {where} ORDER BY {age} LIMIT ?{self._d.skip_locked}",
            (self._d.time(before), limit),
        )

    async def _rows(self, tx: Transaction, kind: RetainedKind, before: datetime, limit: int) -> int:
        picked = [row[0] for row in await self._pick(tx, kind, before, limit)]
        if not picked:
            return 0
        table, key, _age, _which = _KINDS[kind]
        ids_in, ids = self._d.in_list(picked)
        return await tx.execute(f"DELETE FROM {table} WHERE {key} {ids_in}", ids)

    async def _messages(
        self, tx: Transaction, kind: RetainedKind, before: datetime, limit: int
    ) -> int:
        d = self._d
        picked = {row[0] for row in await self._pick(tx, kind, before, limit)}
        if not picked:
            return 0
        if d.skip_locked:
            picked -= await self._replies_held_elsewhere(tx, picked)
            if not picked:
                return 0
        ids_in, ids = d.in_list(sorted(picked))
        erased = await tx.execute(f"DELETE FROM messages WHERE id {ids_in}", ids)
        if erased:
            await self._purge.in_transaction(tx)
        return erased

    async def _replies_held_elsewhere(self, tx: Transaction, picked: set[int]) -> set[int]:
        """The picked messages with a reply this transaction could not lock
        (another batch holds it): deleting them would wait on that batch."""
        ids_in, ids = self._d.in_list(sorted(picked))
        where = f"WHERE in_reply_to {ids_in}"
        replies = await tx.fetchall(f"SELECT id, in_reply_to FROM messages {where}", ids)
        if not replies:
            return set()
        locked = {
            row[0]
            for row in await tx.fetchall(
                f"SELECT id FROM messages {where}{self._d.skip_locked}", ids
            )
        }
        return {parent for reply, parent in replies if reply not in locked}

    async def _updates(
        self, tx: Transaction, kind: RetainedKind, before: datetime, limit: int
    ) -> int:
        if "parked_updates" not in self._tables:
            return 0
        cutoff = self._d.time(before)
        return await tx.execute(
            "DELETE FROM parked_updates WHERE (source, update_id) IN ("
            "SELECT source, update_id FROM parked_updates WHERE parked_at < ? "
            f"ORDER BY parked_at LIMIT ?{self._d.skip_locked})",
            (cutoff, limit),
        )
