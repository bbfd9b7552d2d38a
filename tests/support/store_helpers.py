"""Test helpers on the backends: checks that run SQL on their tables and
shortcuts to their stores (the PostgreSQL side is in pg_helpers.py). None of
this is part of a production interface."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from core.commitments.store import CommitmentStore, Filter
from core.heartbeat.store import HeartbeatStore
from core.limits.store import BudgetStore
from core.reminders.store import ReminderStore
from core.store.backends import open_backend
from core.store.base import SearchScope, Store
from core.store.postgres import PostgresStore
from core.store.postgres.due_claims import pick_due_per_chat
from core.store.sql.commitments import SqlCommitmentStore
from core.store.sql.heartbeat import SqlHeartbeatStore
from core.store.sql.reminders import SqlReminderStore
from core.store.sqlite import (
    SqliteConnection,
    SqliteStore,
)
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.fts import AGENT_SPAN, rowid_sql, session_filter
from core.store.sqlite.search import INDEXED_SQL, ranked_sql
from core.users import FollowUpPreferences
from core.users.store import UserZoneStore
from tests.support import pg_helpers


def open_store(url: str, *, base_dir: Path | None = None) -> SqliteStore:
    """The transcript store of the backend for `url` (not yet opened)."""
    store = open_backend(url, base_dir=base_dir).store
    assert isinstance(store, SqliteStore)
    return store


def open_any_store(url: str) -> Store:
    """The transcript store of the backend for `url`, whichever it is (not
    yet opened)."""
    return open_backend(url).store


def _sqlite(store: Store) -> SqliteConnection:
    """The connection of a SQLite transcript store."""
    assert isinstance(store, SqliteStore), f"a SQLite store, not {type(store).__name__}"
    return store.connection


# The follow-up stores run on the transcript store's connection, whichever
# backend it is.


def commitment_store_for(store: Store) -> CommitmentStore:
    if isinstance(store, PostgresStore):
        return SqlCommitmentStore(store.connection)
    return SqlCommitmentStore(_sqlite(store))


def heartbeat_store_for(store: Store) -> HeartbeatStore:
    if isinstance(store, PostgresStore):
        return SqlHeartbeatStore(store.connection, pick_due=pick_due_per_chat)
    return SqlHeartbeatStore(_sqlite(store))


def user_zone_store_for(store: Store) -> UserZoneStore:
    from core.store.sql.users import SqlUserZoneStore

    if isinstance(store, PostgresStore):
        return SqlUserZoneStore(store.connection)
    return SqlUserZoneStore(_sqlite(store))


def followup_prefs_for(store: Store) -> FollowUpPreferences:
    from core.store.sql.followup_prefs import SqlFollowUpPreferenceStore

    if isinstance(store, PostgresStore):
        return FollowUpPreferences(SqlFollowUpPreferenceStore(store.connection))
    return FollowUpPreferences(SqlFollowUpPreferenceStore(_sqlite(store)))


def budgets_for(store: Store) -> BudgetStore:
    from core.store.sql.limits import SqlBudgetStore

    if isinstance(store, PostgresStore):
        return SqlBudgetStore(store.connection)
    return SqlBudgetStore(_sqlite(store))


def make_reminder_store(store: Store) -> ReminderStore:
    if isinstance(store, PostgresStore):
        return SqlReminderStore(store.connection)
    return SqlReminderStore(_sqlite(store))


async def mark_sent(
    heartbeat: HeartbeatStore, commitment_id: str, *, now: datetime, message_id: str | None
) -> None:
    """Record a delivered follow-up the way the heartbeat does: claim it, then
    finish the claim as sent."""
    claimed = await heartbeat.claim(
        [commitment_id], worker="test", now=now, lease_until=now + timedelta(minutes=10)
    )
    assert claimed, f"commitment {commitment_id} is not active and unclaimed"
    await heartbeat.finish(claimed, "sent", worker="test", now=now, message_id=message_id)


def search_plan_sql(scope: SearchScope, *, phrase: bool) -> str:
    """The ranked search statement for `scope` (for EXPLAIN QUERY PLAN)."""
    return ranked_sql(scope, phrase=phrase)


async def deactivate(store: Store, message_id: int) -> None:
    """Hide a message, as no Store method does yet."""
    if isinstance(store, PostgresStore):
        await pg_helpers.deactivate(store, message_id)
        return
    await _sqlite(store).run_write(
        lambda conn: conn.execute("UPDATE messages SET active = 0 WHERE id = ?", (message_id,))
    )


async def count_messages(store: Store) -> int:
    """Message rows of every session, active or not."""
    if isinstance(store, PostgresStore):
        rows = await store.connection.fetchall("SELECT count(*) FROM messages")
    else:
        rows = await _sqlite(store).fetchall("SELECT count(*) FROM messages")
    return int(rows[0][0])


async def count_index_rows(store: Store, session_key: str | None = None) -> int:
    """Full-text rows, of one session or of all."""
    if isinstance(store, PostgresStore):
        return await pg_helpers.count_index_rows(store, session_key)
    sqlite_store = _sqlite(store)
    if session_key is None:
        rows = await sqlite_store.fetchall("SELECT count(*) FROM messages_fts")
    else:
        session = await sqlite_store.fetchall(
            "SELECT id FROM sessions WHERE key = ?", (session_key,)
        )
        if not session:
            return 0
        rows = await sqlite_store.fetchall(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
            (session_filter(session[0][0]),),
        )
    return int(rows[0][0])


async def index_consistency(store: Store, session_key: str | None = None) -> tuple[int, int]:
    """(active indexed messages without a correct full-text row, full-text
    rows without their active indexed message); (0, 0) when consistent."""
    if isinstance(store, PostgresStore):
        return await pg_helpers.index_consistency(store, session_key)
    return await _sqlite(store).run_read(lambda conn: _consistency(conn, session_key))


# An index row is correct when it exists for an active indexed message, in
# its agent's rowid range, and carries that message's session token.
_ROW_MATCHES = f"f.rowid = {rowid_sql('m.session_id', 'm.id')} AND f.session = 's' || m.session_id"
# Orphan checks find the message by id first, then compare.
_MESSAGE_OF_F = f"m.id = f.rowid % {AGENT_SPAN} AND "


def _consistency(conn: sqlite3.Connection, session_key: str | None) -> tuple[int, int]:
    if session_key is None:
        missing_sql = (
            f"SELECT count(*) FROM messages m WHERE m.active = 1 AND {INDEXED_SQL} "
            f"AND NOT EXISTS (SELECT 1 FROM messages_fts f WHERE {_ROW_MATCHES})"
        )
        orphan_sql = (
            "SELECT count(*) FROM messages_fts f WHERE NOT EXISTS "
            f"(SELECT 1 FROM messages m WHERE {_MESSAGE_OF_F}{_ROW_MATCHES} AND m.active = 1 "
            f"AND {INDEXED_SQL})"
        )
        (missing,) = conn.execute(missing_sql).fetchone()
        (orphans,) = conn.execute(orphan_sql).fetchone()
        return int(missing), int(orphans)
    row = conn.execute("SELECT id FROM sessions WHERE key = ?", (session_key,)).fetchone()
    if row is None:
        return 0, 0
    (missing,) = conn.execute(
        f"SELECT count(*) FROM messages m WHERE m.session_id = ? AND m.active = 1 "
        f"AND {INDEXED_SQL} AND NOT EXISTS (SELECT 1 FROM messages_fts f WHERE {_ROW_MATCHES})",
        row,
    ).fetchone()
    (orphans,) = conn.execute(
        "SELECT count(*) FROM messages_fts f WHERE f.rowid IN "
        "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?) AND NOT EXISTS "
        f"(SELECT 1 FROM messages m WHERE {_MESSAGE_OF_F}{_ROW_MATCHES} AND m.active = 1 "
        f"AND {INDEXED_SQL})",
        (session_filter(row[0]),),
    ).fetchone()
    return int(missing), int(orphans)


def chat_filter(agent_id: str, session_key: str, sender_id: str | None) -> Filter:
    """What one user in one chat may see and change (tests only)."""
    return Filter(agent_id=agent_id, session_key=session_key, sender_id=sender_id)
