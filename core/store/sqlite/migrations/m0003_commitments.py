"""Inferred commitments: short-lived follow-ups, one scope each.

Times are INTEGER milliseconds since the Unix epoch, UTC. Every index below
answers one question that would otherwise scan the table:

- commitments_due:     the heartbeat's "what is due now / when next"
- commitments_dedupe:  one active commitment per (scope, dedupe key); also
                       "active commitments of this scope" for extraction and
                       the slash commands
- commitments_expiry:  the expiry sweep, "active with due_latest before T"
- commitments_sent:    the rolling 24 h cap, "sent in this agent session since T"
- commitments_session: a chat's commitments of any status, and the delete trigger
"""

SQL = """
CREATE TABLE commitments (
    id                 TEXT PRIMARY KEY,
    agent_id           TEXT NOT NULL,
    session_key        TEXT NOT NULL,
    platform           TEXT NOT NULL,
    chat_id            TEXT NOT NULL,
    thread_id          TEXT,
    sender_id          TEXT,
    kind               TEXT NOT NULL CHECK (kind IN
                           ('event_check_in', 'deadline_check', 'care_check_in', 'open_loop')),
    sensitivity        TEXT NOT NULL CHECK (sensitivity IN ('routine', 'personal', 'care')),
    source             TEXT NOT NULL CHECK (source IN ('inferred_user_context', 'agent_promise')),
    status             TEXT NOT NULL CHECK (status IN
                           ('pending', 'snoozed', 'sent', 'dismissed', 'resolved', 'expired',
                            'failed')),
    reason             TEXT NOT NULL,
    suggested_text     TEXT NOT NULL,
    dedupe_key         TEXT NOT NULL,
    confidence         REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    due_earliest       INTEGER NOT NULL,
    due_latest         INTEGER NOT NULL CHECK (due_latest >= due_earliest),
    due_timezone       TEXT NOT NULL,
    -- Informational, no foreign key: deleting a message must not have to
    -- look through commitments, and the commitment stands on its own.
    source_message_id  INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    last_error         TEXT,
    sent_at            INTEGER,
    sent_message_id    TEXT,
    dismissed_at       INTEGER,
    snoozed_until      INTEGER,
    expired_at         INTEGER,
    resolved_at        INTEGER
);

-- Partial indexes hold active rows only, so they stay small however many
-- finished commitments pile up; the status is in their WHERE rather than a
-- leading column (which would split every range in two and lead the planner
-- to prefer it over the scope index). Queries repeat the exact WHERE term
-- (status IN ('pending', 'snoozed')) so SQLite can use them.
CREATE INDEX commitments_due ON commitments(due_earliest)
    WHERE status IN ('pending', 'snoozed');

CREATE UNIQUE INDEX commitments_dedupe
    ON commitments(session_key, coalesce(sender_id, ''), dedupe_key)
    WHERE status IN ('pending', 'snoozed');

CREATE INDEX commitments_expiry ON commitments(due_latest)
    WHERE status IN ('pending', 'snoozed');

CREATE INDEX commitments_sent ON commitments(agent_id, session_key, sent_at)
    WHERE sent_at IS NOT NULL;

CREATE INDEX commitments_session ON commitments(session_key, status);

-- A deleted session takes its commitments along in the same transaction:
-- their reasons quote the conversation, and nothing may be delivered into a
-- conversation that no longer exists.
CREATE TRIGGER commitments_session_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM commitments WHERE session_key = old.key;
END;
"""
