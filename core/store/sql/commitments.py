"""CommitmentStore in SQL written once.

Every state change names the state it starts from in its WHERE, so two
callers racing on one commitment cannot both win. An extraction answer is
applied in one transaction serialised per session (`Transaction.serialize`:
PostgreSQL's transaction-scoped advisory lock; SQLite's one writer), so the
duplicate check and the insert it decides on never interleave with another
worker's.

Active means status IN ('pending', 'snoozed'); that exact term appears in
every query that should use a partial index (SQLite uses one only when the
query repeats its WHERE term).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from core.commitments.model import (
    ACTIVE_STATUSES,
    Commitment,
    NewCommitment,
    Scope,
    new_commitment_id,
)
from core.commitments.store import Applied, CommitmentStore, Filter, MergeRule, ScopeResult
from core.store.dialect import Dialect, placeholders
from core.store.sql.database import Database, Params, Row, Transaction
from core.store.sql.silenced import SILENCED_SCOPE

# Names "a session's extraction results" among the locks writers take.
EXTRACTION_NAMESPACE = 0x6B63  # "kc"

# In the field order of the Commitment dataclass, which `commitment` relies on.
COLUMN_NAMES = (
    "id", "agent_id", "session_key", "platform", "chat_id", "thread_id", "sender_id",
    "kind", "sensitivity", "source", "status", "reason", "suggested_text", "dedupe_key",
    "confidence", "due_earliest", "due_latest", "due_timezone", "source_message_id",
    "created_at", "updated_at", "attempts", "last_error", "sent_at", "sent_message_id",
    "dismissed_at", "snoozed_until", "expired_at", "resolved_at",
)  # fmt: skip
COLUMNS = ", ".join(COLUMN_NAMES)
_TIMES = {"due_earliest", "due_latest", "created_at", "updated_at", "sent_at"}
_TIMES |= {"dismissed_at", "snoozed_until", "expired_at", "resolved_at"}
_TIME_COLUMNS = tuple(i for i, name in enumerate(COLUMN_NAMES) if name in _TIMES)

ACTIVE = "status IN ('pending', 'snoozed')"
# Ends a delivery claim: every claim column goes, so no later statement sees
# a leftover (core/heartbeat/store.py describes the claim).
NO_CLAIM = "claimed_at = NULL, claim_phase = NULL, claimed_by = NULL, lease_until = NULL"
# Reopening a row must not make it a second active one with its dedupe key
# (the commitments_dedupe unique index would refuse the whole statement).
NO_ACTIVE_TWIN = (
    "NOT EXISTS (SELECT 1 FROM commitments AS twin WHERE "
    "twin.session_key = commitments.session_key "
    "AND coalesce(twin.sender_id, '') = coalesce(commitments.sender_id, '') "
    "AND twin.dedupe_key = commitments.dedupe_key "
    "AND twin.status IN ('pending', 'snoozed'))"
)
# How many session keys one read names: far below SQLite's parameter limit,
# and no smaller than an extraction batch, so PostgreSQL reads it at once.
_KEYS_PER_READ = 500

_INSERT = (
    f"INSERT INTO commitments({COLUMNS}) VALUES ({placeholders(len(COLUMN_NAMES))}) "
    f"ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS}"
)
_FIND_DUPLICATE = (
    f"SELECT {COLUMNS} FROM commitments WHERE session_key = ? "
    f"AND coalesce(sender_id, '') = ? AND dedupe_key = ? AND {ACTIVE}"
)
_MERGE = (
    "UPDATE commitments SET confidence = ?, due_earliest = ?, due_latest = ?, reason = ?, "
    f"suggested_text = ?, sensitivity = ?, updated_at = ? WHERE id = ? RETURNING {COLUMNS}"
)


def scope_params(scope: Scope) -> tuple[Any, ...]:
    """The parameters of `scope_match`, in its column order."""
    return (
        scope.agent_id,
        scope.session_key,
        scope.platform,
        scope.chat_id,
        scope.thread_id,
        scope.sender_id,
    )


def scope_match(d: Dialect) -> str:
    """The condition that a row belongs to exactly one scope."""
    same = d.null_safe_equal
    return (
        "agent_id = ? AND session_key = ? AND platform = ? AND chat_id = ? "
        f"AND thread_id {same} ? AND sender_id {same} ?"
    )


def commitment(d: Dialect, row: Row) -> Commitment:
    """A commitments row (COLUMNS) as a record."""
    values = list(row)
    for i in _TIME_COLUMNS:
        values[i] = d.from_maybe_time(values[i])
    return Commitment(*values)


def filter_sql(where: Filter | None) -> tuple[str, list[Any]]:
    """SQL conditions (joined with AND, never empty) and their parameters."""
    clauses: list[str] = ["1 = 1"]
    params: list[Any] = []
    if where is None:
        return clauses[0], params
    for column, value in (
        ("agent_id", where.agent_id),
        ("session_key", where.session_key),
        ("sender_id", where.sender_id),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if where.statuses is not None:
        statuses = sorted(set(where.statuses))
        if not statuses:
            clauses.append("1 = 0")
        elif statuses == sorted(ACTIVE_STATUSES):
            clauses.append(ACTIVE)  # the literal term, so partial indexes apply
        else:
            clauses.append(f"status IN ({placeholders(len(statuses))})")
            params.extend(statuses)
    return " AND ".join(clauses), params


class SqlCommitmentStore(CommitmentStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d: Dialect = db.dialect
        self._scope_match = scope_match(self._d)

    def _row(self, row: Row) -> Commitment:
        return commitment(self._d, row)

    async def _rows(self, sql: str, params: Params = ()) -> list[Commitment]:
        return [self._row(r) for r in await self._db.query(sql, params)]

    async def _update_one(self, sql: str, params: Params) -> Commitment | None:
        rows = await self._db.execute(sql, params)
        return self._row(rows[0]) if rows else None

    # --- extraction ----------------------------------------------------------

    async def active_for_scopes(self, scopes: Sequence[Scope]) -> dict[Scope, list[Commitment]]:
        found: dict[Scope, list[Commitment]] = {s: [] for s in scopes}
        keys = sorted({s.session_key for s in scopes})
        for start in range(0, len(keys), _KEYS_PER_READ):
            listed, params = self._d.in_list(keys[start : start + _KEYS_PER_READ])
            rows = await self._rows(
                f"SELECT {COLUMNS} FROM commitments WHERE session_key {listed} AND {ACTIVE} "
                "ORDER BY due_earliest, id",
                params,
            )
            for c in rows:
                if c.scope in found:
                    found[c.scope].append(c)
        return found

    async def apply_extractions(
        self, results: Sequence[ScopeResult], *, now: datetime, merge: MergeRule
    ) -> Applied:
        if not results:
            return Applied()
        at = self._d.time(now)

        async def work(tx: Transaction) -> Applied:
            # In one order for every worker, so two batches never deadlock.
            for key in sorted({r.scope.session_key for r in results}):
                await tx.serialize(EXTRACTION_NAMESPACE, key)
            applied = Applied()
            for result in results:
                await self._apply_one(tx, result, at, applied, merge)
            return applied

        return await self._db.transact(work)

    async def _apply_one(
        self, tx: Transaction, result: ScopeResult, at: Any, applied: Applied, merge: MergeRule
    ) -> None:
        scope = result.scope
        closed_keys: set[str] = set()
        ids = sorted(set(result.resolved_ids))
        if ids:
            listed, params = self._d.in_list(ids)
            rows = await tx.fetchall(
                "UPDATE commitments SET status = 'resolved', resolved_at = ?, updated_at = ? "
                f"WHERE id {listed} AND {self._scope_match} AND {ACTIVE} "
                "RETURNING id, dedupe_key",
                (at, at, *params, *scope_params(scope)),
            )
            applied.resolved.extend(sorted(r[0] for r in rows))
            closed_keys.update(r[1] for r in rows)
        if result.new and await self._silenced(tx, scope):
            # Switched off while the model read the exchange: nothing new
            # about them is stored (closing what they settled still is).
            return
        for n in result.new:
            if n.scope != scope or n.dedupe_key in closed_keys:
                # Another scope's candidate cannot ride along; and the exchange
                # that closed a topic does not reopen it.
                continue
            record, created = await self._insert_or_merge(tx, n, at, merge)
            (applied.created if created else applied.merged).append(record)

    async def _silenced(self, tx: Transaction, scope: Scope) -> bool:
        params = (scope.agent_id, scope.platform, scope.sender_id or "", scope.session_key)
        return await tx.fetchone(SILENCED_SCOPE, params) is not None

    async def _insert_or_merge(
        self, tx: Transaction, n: NewCommitment, at: Any, merge: MergeRule
    ) -> tuple[Commitment, bool]:
        s = n.scope
        t = self._d.time
        row = await tx.fetchone(_FIND_DUPLICATE, (s.session_key, s.sender_id or "", n.dedupe_key))
        existing = None if row is None else self._row(row)
        if existing is not None and existing.scope == s:
            # The dedupe index keys on session + sender; the rest of the scope
            # is implied by the session key, checked here all the same.
            m = merge(existing, n)
            params = (m.confidence, t(m.due_earliest), t(m.due_latest), m.reason)
            params += (m.suggested_text, m.sensitivity, at, existing.id)
            merged = await tx.fetchone(_MERGE, params)
            assert merged is not None  # the row is ours under the session's lock
            return self._row(merged), False
        for _ in range(3):
            values = (
                new_commitment_id(),
                *scope_params(s),
                n.kind,
                n.sensitivity,
                n.source,
                "pending",
                n.reason,
                n.suggested_text,
                n.dedupe_key,
                n.confidence,
                t(n.due_earliest),
                t(n.due_latest),
                n.due_timezone,
                n.source_message_id,
                t(n.created_at),
                at,
                0,
                *([None] * 7),  # last_error … resolved_at
            )
            created = await tx.fetchone(_INSERT, values)
            # None only on a (48-bit, vanishingly rare) id collision: new id.
            if created is not None:
                return self._row(created), True
        raise RuntimeError("three commitment id collisions in a row")

    # --- list / dismiss / snooze ---------------------------------------------

    async def get(self, commitment_id: str, where: Filter | None = None) -> Commitment | None:
        clause, params = filter_sql(where)
        rows = await self._rows(
            f"SELECT {COLUMNS} FROM commitments WHERE id = ? AND {clause}",
            [commitment_id, *params],
        )
        return rows[0] if rows else None

    async def list(self, where: Filter, *, limit: int | None = None) -> list[Commitment]:
        clause, params = filter_sql(where)
        sql = f"SELECT {COLUMNS} FROM commitments WHERE {clause} ORDER BY due_earliest, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return await self._rows(sql, params)

    async def count_by_status(self) -> dict[str, int]:
        rows = await self._db.query("SELECT status, COUNT(*) FROM commitments GROUP BY status")
        return {str(status): int(count) for status, count in rows}

    async def dismiss(
        self, commitment_id: str, *, now: datetime, where: Filter | None = None
    ) -> Commitment | None:
        return await self._dismiss_from(ACTIVE, commitment_id, now=now, where=where)

    async def _dismiss_from(
        self, status_clause: str, commitment_id: str, *, now: datetime, where: Filter | None
    ) -> Commitment | None:
        clause, params = filter_sql(where)
        at = self._d.time(now)
        return await self._update_one(
            "UPDATE commitments SET status = 'dismissed', dismissed_at = ?, updated_at = ? "
            f"WHERE id = ? AND {clause} AND {status_clause} RETURNING {COLUMNS}",
            [at, at, commitment_id, *params],
        )

    async def snooze(
        self,
        commitment_id: str,
        *,
        until: datetime,
        latest: datetime,
        now: datetime,
        where: Filter | None = None,
    ) -> Commitment | None:
        return await self._snooze_from(
            ACTIVE, commitment_id, until=until, latest=latest, now=now, where=where
        )

    async def _snooze_from(
        self,
        status_clause: str,
        commitment_id: str,
        *,
        until: datetime,
        latest: datetime,
        now: datetime,
        where: Filter | None,
        extra_set: str = "",
    ) -> Commitment | None:
        clause, params = filter_sql(where)
        t = self._d.time
        return await self._update_one(
            "UPDATE commitments SET status = 'snoozed', snoozed_until = ?, due_earliest = ?, "
            f"due_latest = ?, {extra_set}updated_at = ? "
            f"WHERE id = ? AND {clause} AND {status_clause} RETURNING {COLUMNS}",
            [t(until), t(until), t(latest), t(now), commitment_id, *params],
        )

    # --- the follow-up buttons -----------------------------------------------

    async def dismiss_sent(
        self, commitment_id: str, *, now: datetime, where: Filter | None = None
    ) -> Commitment | None:
        return await self._dismiss_from("status = 'sent'", commitment_id, now=now, where=where)

    async def snooze_sent(
        self,
        commitment_id: str,
        *,
        until: datetime,
        latest: datetime,
        now: datetime,
        where: Filter | None = None,
    ) -> Commitment | None:
        return await self._snooze_from(
            f"status = 'sent' AND {NO_ACTIVE_TWIN}",
            commitment_id,
            until=until,
            latest=latest,
            now=now,
            where=where,
            extra_set=f"{NO_CLAIM}, ",
        )

    # --- lifecycle -----------------------------------------------------------

    async def expire(self, *, before: datetime, now: datetime) -> int:
        t = self._d.time
        params = (t(now), t(now), t(before))

        async def work(tx: Transaction) -> int:
            return await tx.execute(
                "UPDATE commitments SET status = 'expired', expired_at = ?, updated_at = ? "
                f"WHERE {ACTIVE} AND due_latest < ?",
                params,
            )

        return await self._db.transact(work)
