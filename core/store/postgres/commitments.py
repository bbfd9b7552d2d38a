"""CommitmentStore on the shared PostgreSQL pool (connection.py).

The same behaviour as the SQLite store (core/store/sqlite/commitments.py):
each multi-statement change (resolve + insert/merge) is one transaction, and
every state change names the state it starts from in its WHERE, so two
callers racing on one commitment cannot both win.

Active means status IN ('pending', 'snoozed'); that exact term appears in
every query that should use a partial index (see migration m0003).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from core.commitments.model import (
    Commitment,
    NewCommitment,
    Scope,
    new_commitment_id,
)
from core.commitments.store import Applied, CommitmentStore, Filter, MergeRule, ScopeResult
from core.store.commitment_sql import ACTIVE, filter_sql, scope_params
from core.store.postgres.claims import aware
from core.store.postgres.connection import Connection, PostgresConnection
from core.store.postgres.locks import EXTRACTION_NAMESPACE

# In the field order of the Commitment dataclass, which _row relies on.
COLUMN_NAMES = (
    "id", "agent_id", "session_key", "platform", "chat_id", "thread_id", "sender_id",
    "kind", "sensitivity", "source", "status", "reason", "suggested_text", "dedupe_key",
    "confidence", "due_earliest", "due_latest", "due_timezone", "source_message_id",
    "created_at", "updated_at", "attempts", "last_error", "sent_at", "sent_message_id",
    "dismissed_at", "snoozed_until", "expired_at", "resolved_at",
)  # fmt: skip
COLUMNS = ", ".join(COLUMN_NAMES)

_INSERT = (
    f"INSERT INTO commitments({COLUMNS}) VALUES ({', '.join(['%s'] * len(COLUMN_NAMES))}) "
    f"ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS}"
)
_FIND_DUPLICATE = (
    f"SELECT {COLUMNS} FROM commitments WHERE session_key = %s "
    f"AND coalesce(sender_id, '') = %s AND dedupe_key = %s AND {ACTIVE}"
)
_MERGE = (
    "UPDATE commitments SET confidence = %s, due_earliest = %s, due_latest = %s, reason = %s, "
    f"suggested_text = %s, sensitivity = %s, updated_at = %s WHERE id = %s RETURNING {COLUMNS}"
)
# Reopening a row must not make it a second active one with its dedupe key
# (the commitments_dedupe unique index would refuse the whole statement).
_NO_ACTIVE_TWIN = (
    "NOT EXISTS (SELECT 1 FROM commitments AS twin WHERE "
    "twin.session_key = commitments.session_key "
    "AND coalesce(twin.sender_id, '') = coalesce(commitments.sender_id, '') "
    "AND twin.dedupe_key = commitments.dedupe_key "
    "AND twin.status IN ('pending', 'snoozed'))"
)
_SCOPE_MATCH = (
    "agent_id = %s AND session_key = %s AND platform = %s AND chat_id = %s "
    "AND thread_id IS NOT DISTINCT FROM %s AND sender_id IS NOT DISTINCT FROM %s"
)


def commitment_row(row: Sequence[Any]) -> Commitment:
    return Commitment(*row)


def _where(where: Filter | None) -> tuple[str, list[Any]]:
    return filter_sql(where, "%s")


async def _one(conn: Connection, sql: str, params: Sequence[Any]) -> Commitment | None:
    cursor = await conn.execute(sql, params)  # type: ignore[arg-type]
    row = await cursor.fetchone()
    return None if row is None else commitment_row(row)


class PostgresCommitmentStore(CommitmentStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Commitment]:
        return [commitment_row(r) for r in await self._db.fetchall(sql, params)]

    async def _update_one(self, sql: str, params: Sequence[Any]) -> Commitment | None:
        async with self._db.transaction() as conn:
            return await _one(conn, sql, params)

    # --- extraction ----------------------------------------------------------

    async def active_for_scopes(self, scopes: Sequence[Scope]) -> dict[Scope, list[Commitment]]:
        found: dict[Scope, list[Commitment]] = {s: [] for s in scopes}
        keys = sorted({s.session_key for s in scopes})
        if not keys:
            return found
        rows = await self._rows(
            f"SELECT {COLUMNS} FROM commitments WHERE session_key = ANY(%s) AND {ACTIVE} "
            "ORDER BY due_earliest, id",
            (keys,),
        )
        for c in rows:
            if c.scope in found:
                found[c.scope].append(c)
        return found

    async def apply_extractions(
        self, results: Sequence[ScopeResult], *, now: datetime, merge: MergeRule
    ) -> Applied:
        aware(now)
        applied = Applied()
        if not results:
            return applied
        async with self._db.transaction() as conn:
            # In one order for every worker, so two batches never deadlock.
            for key in sorted({r.scope.session_key for r in results}):
                # Serialised per session across workers: the duplicate check
                # and the insert it decides on must not interleave.
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                    (EXTRACTION_NAMESPACE, key),
                )
            for result in results:
                await self._apply_one(conn, result, now, applied, merge)
        return applied

    async def _apply_one(
        self,
        conn: Connection,
        result: ScopeResult,
        now: datetime,
        applied: Applied,
        merge: MergeRule,
    ) -> None:
        scope = result.scope
        closed_keys: set[str] = set()
        ids = sorted(set(result.resolved_ids))
        if ids:
            cursor = await conn.execute(
                "UPDATE commitments SET status = 'resolved', resolved_at = %s, updated_at = %s "
                f"WHERE id = ANY(%s) AND {_SCOPE_MATCH} AND {ACTIVE} RETURNING id, dedupe_key",
                (now, now, ids, *scope_params(scope)),
            )
            rows = await cursor.fetchall()
            applied.resolved.extend(r[0] for r in sorted(rows))
            closed_keys.update(r[1] for r in rows)
        for n in result.new:
            if n.scope != scope or n.dedupe_key in closed_keys:
                # Another scope's candidate cannot ride along; and the exchange
                # that closed a topic does not reopen it.
                continue
            record, created = await self._insert_or_merge(conn, n, now, merge)
            (applied.created if created else applied.merged).append(record)

    async def _insert_or_merge(
        self, conn: Connection, n: NewCommitment, now: datetime, merge: MergeRule
    ) -> tuple[Commitment, bool]:
        s = n.scope
        existing = await _one(
            conn, _FIND_DUPLICATE, (s.session_key, s.sender_id or "", n.dedupe_key)
        )
        if existing is not None and existing.scope == s:
            # The dedupe index keys on session + sender; the rest of the scope
            # is implied by the session key, checked here all the same.
            m = merge(existing, n)
            params = (m.confidence, aware(m.due_earliest), aware(m.due_latest), m.reason)
            params += (m.suggested_text, m.sensitivity, now, existing.id)
            merged = await _one(conn, _MERGE, params)
            assert merged is not None  # the row is ours under the session's lock
            return merged, False
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
                aware(n.due_earliest),
                aware(n.due_latest),
                n.due_timezone,
                n.source_message_id,
                aware(n.created_at),
                now,
                0,
                *([None] * 7),  # last_error … resolved_at
            )
            created = await _one(conn, _INSERT, values)
            # None only on a (48-bit, vanishingly rare) id collision: new id.
            if created is not None:
                return created, True
        raise RuntimeError("three commitment id collisions in a row")

    # --- list / dismiss / snooze ---------------------------------------------

    async def get(self, commitment_id: str, where: Filter | None = None) -> Commitment | None:
        clause, params = _where(where)
        rows = await self._rows(
            f"SELECT {COLUMNS} FROM commitments WHERE id = %s AND {clause}",
            [commitment_id, *params],
        )
        return rows[0] if rows else None

    async def list(self, where: Filter, *, limit: int | None = None) -> list[Commitment]:
        clause, params = _where(where)
        sql = f"SELECT {COLUMNS} FROM commitments WHERE {clause} ORDER BY due_earliest, id"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        return await self._rows(sql, params)

    async def count_by_status(self) -> dict[str, int]:
        rows = await self._db.fetchall(
            "SELECT status, COUNT(*) FROM commitments GROUP BY status", ()
        )
        return {str(status): int(count) for status, count in rows}

    async def dismiss(
        self, commitment_id: str, *, now: datetime, where: Filter | None = None
    ) -> Commitment | None:
        return await self._dismiss_from(ACTIVE, commitment_id, now=now, where=where)

    async def _dismiss_from(
        self, status_clause: str, commitment_id: str, *, now: datetime, where: Filter | None
    ) -> Commitment | None:
        clause, params = _where(where)
        return await self._update_one(
            "UPDATE commitments SET status = 'dismissed', dismissed_at = %s, updated_at = %s "
            f"WHERE id = %s AND {clause} AND {status_clause} RETURNING {COLUMNS}",
            [aware(now), now, commitment_id, *params],
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
        clause, params = _where(where)
        return await self._update_one(
            "UPDATE commitments SET status = 'snoozed', snoozed_until = %s, due_earliest = %s, "
            f"due_latest = %s, {extra_set}updated_at = %s "
            f"WHERE id = %s AND {clause} AND {status_clause} RETURNING {COLUMNS}",
            [aware(until), until, aware(latest), aware(now), commitment_id, *params],
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
            f"status = 'sent' AND {_NO_ACTIVE_TWIN}",
            commitment_id,
            until=until,
            latest=latest,
            now=now,
            where=where,
            extra_set="claimed_at = NULL, claim_phase = NULL, claimed_by = NULL, "
            "lease_until = NULL, ",
        )

    # --- lifecycle -----------------------------------------------------------

    async def expire(self, *, before: datetime, now: datetime) -> int:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE commitments SET status = 'expired', expired_at = %s, updated_at = %s "
                f"WHERE {ACTIVE} AND due_latest < %s",
                (aware(now), now, aware(before)),
            )
            return cursor.rowcount
