"""CommitmentStore on the shared SQLite connection (connection.py).

It shares the transcript store's single aiosqlite connection, its lock and
its one-trip-per-transaction `_write`, so commitment writes can never
interleave with a transcript transaction. Each multi-statement change
(resolve + insert/merge) is one function run on the database thread.

Active means status IN ('pending', 'snoozed'); that exact term appears in
every query that should use a partial index (SQLite only uses a partial
index when the query repeats its WHERE term).
"""

from __future__ import annotations

import sqlite3
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
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms

# In the field order of the Commitment dataclass, which _row relies on.
_COLUMN_NAMES = (
    "id", "agent_id", "session_key", "platform", "chat_id", "thread_id", "sender_id",
    "kind", "sensitivity", "source", "status", "reason", "suggested_text", "dedupe_key",
    "confidence", "due_earliest", "due_latest", "due_timezone", "source_message_id",
    "created_at", "updated_at", "attempts", "last_error", "sent_at", "sent_message_id",
    "dismissed_at", "snoozed_until", "expired_at", "resolved_at",
)  # fmt: skip
_COLUMNS = ", ".join(_COLUMN_NAMES)
_TIMES = {"due_earliest", "due_latest", "created_at", "updated_at", "sent_at"}
_TIMES |= {"dismissed_at", "snoozed_until", "expired_at", "resolved_at"}
_TIME_COLUMNS = frozenset(i for i, name in enumerate(_COLUMN_NAMES) if name in _TIMES)

_PLACEHOLDERS = ", ".join("?" * len(_COLUMN_NAMES))
_INSERT = f"INSERT INTO commitments({_COLUMNS}) VALUES ({_PLACEHOLDERS}) RETURNING {_COLUMNS}"
_FIND_DUPLICATE = (
    f"SELECT {_COLUMNS} FROM commitments WHERE session_key = ? "
    f"AND coalesce(sender_id, '') = ? AND dedupe_key = ? AND {ACTIVE}"
)
_MERGE = (
    "UPDATE commitments SET confidence = ?, due_earliest = ?, due_latest = ?, reason = ?, "
    f"suggested_text = ?, sensitivity = ?, updated_at = ? WHERE id = ? RETURNING {_COLUMNS}"
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
    "agent_id = ? AND session_key = ? AND platform = ? AND chat_id = ? "
    "AND thread_id IS ? AND sender_id IS ?"
)


def _row(row: Sequence[Any]) -> Commitment:
    values = [from_ms(v) if i in _TIME_COLUMNS and v is not None else v for i, v in enumerate(row)]
    return Commitment(*values)


def _where(where: Filter | None) -> tuple[str, list[Any]]:
    return filter_sql(where, "?")


class SqliteCommitmentStore(CommitmentStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Commitment]:
        return [_row(r) for r in await self._store.fetchall(sql, params)]

    async def _update_one(self, sql: str, params: Sequence[Any]) -> Commitment | None:
        row = await self._store._write(lambda conn: conn.execute(sql, params).fetchone())
        return None if row is None else _row(row)

    # --- extraction ----------------------------------------------------------

    async def active_for_scopes(self, scopes: Sequence[Scope]) -> dict[Scope, list[Commitment]]:
        found: dict[Scope, list[Commitment]] = {s: [] for s in scopes}
        keys = sorted({s.session_key for s in scopes})
        # Chunks stay far below SQLite's parameter limit.
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = await self._rows(
                f"SELECT {_COLUMNS} FROM commitments "
                f"WHERE session_key IN ({', '.join('?' * len(chunk))}) AND {ACTIVE} "
                "ORDER BY due_earliest, id",
                chunk,
            )
            for c in rows:
                if c.scope in found:
                    found[c.scope].append(c)
        return found

    async def apply_extractions(
        self, results: Sequence[ScopeResult], *, now: datetime, merge: MergeRule
    ) -> Applied:
        now_ms = to_ms(now)

        def work(conn: sqlite3.Connection) -> Applied:
            applied = Applied()
            for result in results:
                self._apply_one(conn, result, now_ms, applied, merge)
            return applied

        return await self._store._write(work)

    def _apply_one(
        self,
        conn: sqlite3.Connection,
        result: ScopeResult,
        now_ms: int,
        applied: Applied,
        merge: MergeRule,
    ) -> None:
        scope = result.scope
        closed_keys: set[str] = set()
        ids = sorted(set(result.resolved_ids))
        if ids:
            rows = conn.execute(
                "UPDATE commitments SET status = 'resolved', resolved_at = ?, updated_at = ? "
                f"WHERE id IN ({', '.join('?' * len(ids))}) AND {_SCOPE_MATCH} AND {ACTIVE} "
                "RETURNING id, dedupe_key",
                (now_ms, now_ms, *ids, *scope_params(scope)),
            ).fetchall()
            applied.resolved.extend(r[0] for r in rows)
            closed_keys.update(r[1] for r in rows)
        for n in result.new:
            if n.scope != scope or n.dedupe_key in closed_keys:
                # Another scope's candidate cannot ride along; and the exchange
                # that closed a topic does not reopen it.
                continue
            record, created = self._insert_or_merge(conn, n, now_ms, merge)
            (applied.created if created else applied.merged).append(record)

    def _insert_or_merge(
        self, conn: sqlite3.Connection, n: NewCommitment, now_ms: int, merge: MergeRule
    ) -> tuple[Commitment, bool]:
        s = n.scope
        row = conn.execute(_FIND_DUPLICATE, (s.session_key, s.sender_id or "", n.dedupe_key))
        existing = row.fetchone()
        if existing is not None:
            old = _row(existing)
            # The dedupe index keys on session + sender; the rest of the scope
            # is implied by the session key, checked here all the same.
            if old.scope == s:
                m = merge(old, n)
                params = (m.confidence, to_ms(m.due_earliest), to_ms(m.due_latest), m.reason)
                params += (m.suggested_text, m.sensitivity, now_ms, old.id)
                return _row(conn.execute(_MERGE, params).fetchone()), False
        for attempt in range(3):
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
                to_ms(n.due_earliest),
                to_ms(n.due_latest),
                n.due_timezone,
                n.source_message_id,
                to_ms(n.created_at),
                now_ms,
                0,
                *([None] * 7),  # last_error … resolved_at
            )
            try:
                return _row(conn.execute(_INSERT, values).fetchone()), True
            except sqlite3.IntegrityError as exc:
                # Only a (48-bit, vanishingly rare) id collision is worth a retry.
                if "commitments.id" not in str(exc) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    # --- list / dismiss / snooze ---------------------------------------------

    async def get(self, commitment_id: str, where: Filter | None = None) -> Commitment | None:
        clause, params = _where(where)
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM commitments WHERE id = ? AND {clause}",
            [commitment_id, *params],
        )
        return rows[0] if rows else None

    async def list(self, where: Filter, *, limit: int | None = None) -> list[Commitment]:
        clause, params = _where(where)
        sql = f"SELECT {_COLUMNS} FROM commitments WHERE {clause} ORDER BY due_earliest, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return await self._rows(sql, params)

    async def count_by_status(self) -> dict[str, int]:
        rows = await self._store.fetchall(
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
            "UPDATE commitments SET status = 'dismissed', dismissed_at = ?, updated_at = ? "
            f"WHERE id = ? AND {clause} AND {status_clause} RETURNING {_COLUMNS}",
            [to_ms(now), to_ms(now), commitment_id, *params],
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
            "UPDATE commitments SET status = 'snoozed', snoozed_until = ?, due_earliest = ?, "
            f"due_latest = ?, {extra_set}updated_at = ? "
            f"WHERE id = ? AND {clause} AND {status_clause} RETURNING {_COLUMNS}",
            [to_ms(until), to_ms(until), to_ms(latest), to_ms(now), commitment_id, *params],
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
            extra_set="claimed_at = NULL, ",
        )

    # --- lifecycle -----------------------------------------------------------

    async def expire(self, *, before: datetime, now: datetime) -> int:
        sql = (
            "UPDATE commitments SET status = 'expired', expired_at = ?, updated_at = ? "
            f"WHERE {ACTIVE} AND due_latest < ?"
        )
        params = (to_ms(now), to_ms(now), to_ms(before))
        return await self._store._write(lambda conn: conn.execute(sql, params).rowcount)
