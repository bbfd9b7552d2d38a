"""Databases as the code before the shared step list left them: each
backend's own numbering in `schema_version`, built by that numbering's steps.

The DDL of each old step is the shared step it became (the files were only
renamed), except PostgreSQL's old third step, "followups", which is now
split in five and is kept here as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from core.store.postgres.migrations import OLD_NUMBERING as OLD_POSTGRES
from core.store.postgres.migrations import load_migrations as postgres_steps
from core.store.sqlite import driver
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.migrations import OLD_NUMBERING as OLD_SQLITE
from core.store.sqlite.migrations import apply_step
from core.store.sqlite.migrations import load_migrations as sqlite_steps

OLD_SQLITE_LATEST = len(OLD_SQLITE)
OLD_POSTGRES_LATEST = len(OLD_POSTGRES)


async def build_old_sqlite(path: Path, upto: int = OLD_SQLITE_LATEST) -> None:
    """A SQLite database at old version `upto`, as the old runner made it."""
    steps = {m.version: m for m in sqlite_steps()}
    async with driver.connect(str(path), isolation_level=None) as db:
        await db.execute(
            "CREATE TABLE schema_version ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        for version, old in enumerate(OLD_SQLITE[:upto], start=1):
            await db.execute("BEGIN IMMEDIATE")
            await apply_step(db, steps[old.reaches])
            await db.execute(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                (version, old.name, 1_700_000_000_000 + version),
            )
            await db.execute("COMMIT")


def build_old_postgres(url: str, upto: int = OLD_POSTGRES_LATEST) -> None:
    """A PostgreSQL database at old version `upto`, as the old runner made it."""
    steps = {m.version: m for m in postgres_steps()}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_version ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, old in enumerate(OLD_POSTGRES[:upto], start=1):
            sql = OLD_FOLLOWUPS_SQL if old.name == "followups" else steps[old.reaches].sql
            with conn.transaction():
                conn.execute(sql.encode())
                conn.execute(
                    "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                    (version, old.name),
                )


def sqlite_schema(path: Path) -> list[tuple[Any, ...]]:
    """Every object's definition, as SQLite stores it."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master"
            " WHERE name <> 'schema_version' ORDER BY type, name"
        ).fetchall()


_POSTGRES_CATALOG = (
    "SELECT table_name, column_name, ordinal_position, data_type, column_default, is_nullable"
    " FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 3",
    "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
    " WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
    "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
    " ORDER BY 1, 2",
    "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1",
    "SELECT proname, prosrc FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1",
)


def postgres_schema(url: str) -> list[list[tuple[Any, ...]]]:
    """Columns, constraints, indexes, triggers and functions, as the catalog
    describes them."""
    with psycopg.connect(url) as conn:
        return [conn.execute(query).fetchall() for query in _POSTGRES_CATALOG]


# PostgreSQL's old m0003_followups, verbatim.
OLD_FOLLOWUPS_SQL = """
CREATE TABLE commitments (
    id                 text PRIMARY KEY,
    agent_id           text NOT NULL,
    session_key        text NOT NULL,
    platform           text NOT NULL,
    chat_id            text NOT NULL,
    thread_id          text,
    sender_id          text,
    kind               text NOT NULL CHECK (kind IN
                           ('event_check_in', 'deadline_check', 'care_check_in', 'open_loop')),
    sensitivity        text NOT NULL CHECK (sensitivity IN ('routine', 'personal', 'care')),
    source             text NOT NULL CHECK (source IN ('inferred_user_context', 'agent_promise')),
    status             text NOT NULL CHECK (status IN
                           ('pending', 'snoozed', 'sent', 'dismissed', 'resolved', 'expired',
                            'failed')),
    reason             text NOT NULL,
    suggested_text     text NOT NULL,
    dedupe_key         text NOT NULL,
    confidence         double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    due_earliest       timestamptz NOT NULL,
    due_latest         timestamptz NOT NULL CHECK (due_latest >= due_earliest),
    due_timezone       text NOT NULL,
    -- Informational, no foreign key: deleting a message must not have to
    -- look through commitments, and the commitment stands on its own.
    source_message_id  bigint,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    attempts           integer NOT NULL DEFAULT 0,
    last_error         text,
    sent_at            timestamptz,
    sent_message_id    text,
    dismissed_at       timestamptz,
    snoozed_until      timestamptz,
    expired_at         timestamptz,
    resolved_at        timestamptz,
    claimed_at         timestamptz,
    claim_phase        text CHECK (claim_phase IN ('claimed', 'sending')),
    claimed_by         text,
    lease_until        timestamptz
);

CREATE INDEX commitments_due ON commitments(due_earliest)
    WHERE status IN ('pending', 'snoozed');

CREATE UNIQUE INDEX commitments_dedupe
    ON commitments(session_key, (coalesce(sender_id, '')), dedupe_key)
    WHERE status IN ('pending', 'snoozed');

CREATE INDEX commitments_expiry ON commitments(due_latest)
    WHERE status IN ('pending', 'snoozed');

CREATE INDEX commitments_sent ON commitments(agent_id, session_key, sent_at)
    WHERE sent_at IS NOT NULL;

CREATE INDEX commitments_session ON commitments(session_key, status);

CREATE INDEX commitments_lease ON commitments(lease_until) WHERE claim_phase IS NOT NULL;

CREATE TABLE reminders (
    id             text PRIMARY KEY,
    agent_id       text NOT NULL,
    session_key    text NOT NULL,
    platform       text NOT NULL,
    chat_id        text NOT NULL,
    thread_id      text,
    created_by     text,
    text           text NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('at', 'after', 'cron')),
    -- Not checked beyond presence: a damaged expression must still load, so
    -- the service can report that one row and carry on with the others.
    cron           text CHECK ((kind = 'cron') = (cron IS NOT NULL)),
    timezone       text NOT NULL,
    next_fire_at   timestamptz NOT NULL,
    status         text NOT NULL CHECK (status IN ('active', 'done', 'cancelled', 'failed')),
    claimed_at     timestamptz,
    last_fired_at  timestamptz,
    attempts       integer NOT NULL DEFAULT 0,
    last_error     text,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    claim_phase    text CHECK (claim_phase IN ('claimed', 'sending')),
    claimed_by     text,
    lease_until    timestamptz
);

-- Only the rows that can fire: finished and in-flight ones never enter it.
CREATE INDEX reminders_due ON reminders(next_fire_at)
    WHERE status = 'active' AND claimed_at IS NULL;

CREATE INDEX reminders_session ON reminders(session_key, next_fire_at);

CREATE INDEX reminders_lease ON reminders(lease_until) WHERE claim_phase IS NOT NULL;

CREATE TABLE heartbeat_turns (
    agent_id      text NOT NULL,
    session_key   text NOT NULL,
    last_turn_at  timestamptz NOT NULL,
    PRIMARY KEY (session_key, agent_id)
);

-- A deleted session takes its follow-up state along in the same
-- transaction: reasons quote the conversation, and nothing may be delivered
-- into a conversation that no longer exists. A trigger, not a foreign key:
-- a commitment or reminder may name a session key before (or without) a
-- session row, as on SQLite.
CREATE FUNCTION sessions_delete_followups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM commitments WHERE session_key = OLD.key;
    DELETE FROM reminders WHERE session_key = OLD.key;
    DELETE FROM heartbeat_turns WHERE session_key = OLD.key;
    RETURN NULL;
END $$;

CREATE TRIGGER sessions_delete_followups AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_delete_followups();
"""
