"""Exact reminders (scheduled tasks), one chat each.

Times are INTEGER milliseconds since the Unix epoch, UTC. The indexes:

- reminders_due:     "what is due now" and "when is the next one" for the
                     scheduler: status = 'active' AND next_fire_at <= T, walked
                     in next_fire_at order, so finding due work costs the due
                     rows, not the table
- reminders_session: one chat's reminders (the list/cancel tools), and the
                     session delete trigger
- reminders_claimed: claims left by a crash, looked up at start-up
"""

SQL = """
CREATE TABLE reminders (
    id             TEXT PRIMARY KEY,
    agent_id       TEXT NOT NULL,
    session_key    TEXT NOT NULL,
    platform       TEXT NOT NULL,
    chat_id        TEXT NOT NULL,
    thread_id      TEXT,
    created_by     TEXT,
    text           TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('at', 'after', 'cron')),
    -- Not checked beyond presence: a damaged expression must still load, so
    -- the service can report that one row and carry on with the others.
    cron           TEXT CHECK ((kind = 'cron') = (cron IS NOT NULL)),
    timezone       TEXT NOT NULL,
    next_fire_at   INTEGER NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('active', 'done', 'cancelled', 'failed')),
    claimed_at     INTEGER,
    last_fired_at  INTEGER,
    attempts       INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);

CREATE INDEX reminders_due ON reminders(status, next_fire_at);

CREATE INDEX reminders_session ON reminders(session_key, next_fire_at);

CREATE INDEX reminders_claimed ON reminders(claimed_at) WHERE claimed_at IS NOT NULL;

-- A deleted conversation takes its reminders along in the same transaction:
-- nothing may be delivered into a chat whose history the user wiped.
CREATE TRIGGER reminders_session_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM reminders WHERE session_key = old.key;
END;
"""
