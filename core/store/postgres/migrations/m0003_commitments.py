"""Inferred commitments: short-lived follow-ups, one scope each.

Times are `timestamptz`. Every row carries its session key and agent id, so
a PostgreSQL sharded by session key needs no new columns. The claim columns
come with steps 5 (heartbeat) and 7 (claim leases), as on SQLite.

Indexes, each answering one question that would otherwise scan the table:

- commitments_due:     active rows by due time (due work, next due time)
- commitments_dedupe:  one active commitment per (session, sender, dedupe key);
                       also "active commitments of these sessions"
- commitments_expiry:  the expiry sweep, "active with due_latest before T"
- commitments_sent:    the rolling 24 h cap, "sent in this agent session since T"
- commitments_session: a chat's commitments of any status, and session deletion

Partial indexes name the active statuses exactly as the queries do, so the
planner can prove a query's WHERE implies the index's.
"""

SQL = """
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
    resolved_at        timestamptz
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

-- A deleted session takes its follow-up state along in the same
-- transaction: reasons quote the conversation, and nothing may be delivered
-- into a conversation that no longer exists. A trigger, not a foreign key:
-- a commitment may name a session key before (or without) a session row, as
-- on SQLite. Steps 4 and 5 extend the function to reminders and heartbeat
-- turns.
CREATE FUNCTION sessions_delete_followups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM commitments WHERE session_key = OLD.key;
    RETURN NULL;
END $$;

CREATE TRIGGER sessions_delete_followups AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_delete_followups();
"""
