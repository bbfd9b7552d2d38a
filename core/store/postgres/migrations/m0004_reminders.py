"""Exact reminders (scheduled tasks), one chat each.

Times are `timestamptz`. The claim columns beyond `claimed_at` come with
step 7 (claim leases), as on SQLite. The indexes:

- reminders_due:     active, unclaimed reminders by fire time; only the rows
                     that can fire, finished and in-flight ones never enter it
- reminders_session: one chat's reminders, and session deletion
"""

SQL = """
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
    updated_at     timestamptz NOT NULL
);

CREATE INDEX reminders_due ON reminders(next_fire_at)
    WHERE status = 'active' AND claimed_at IS NULL;

CREATE INDEX reminders_session ON reminders(session_key, next_fire_at);

-- A deleted conversation takes its reminders along in the same transaction:
-- nothing may be delivered into a chat whose history the user wiped.
CREATE OR REPLACE FUNCTION sessions_delete_followups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM commitments WHERE session_key = OLD.key;
    DELETE FROM reminders WHERE session_key = OLD.key;
    RETURN NULL;
END $$;
"""
