"""The extraction queue as rows (core/commitments/jobs.py): a crash or stop
no longer loses the exchanges waiting for the extraction pass."""

SQL = """
CREATE TABLE extraction_jobs (
    id               INTEGER PRIMARY KEY,
    agent_id         TEXT NOT NULL,
    session_key      TEXT NOT NULL,
    platform         TEXT NOT NULL,
    chat_id          TEXT NOT NULL,
    thread_id        TEXT,
    sender_id        TEXT,
    chat_kind        TEXT NOT NULL,
    user_message_id  INTEGER NOT NULL,
    user_text        TEXT NOT NULL,
    assistant_text   TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    -- NULL claimed_by: released, any worker may take it.
    claimed_by       TEXT,
    lease_until      INTEGER
);

-- Orphans in queue order: released ones, then by lease end.
CREATE INDEX extraction_jobs_lease ON extraction_jobs(coalesce(lease_until, 0), id);
CREATE INDEX extraction_jobs_worker ON extraction_jobs(claimed_by) WHERE claimed_by IS NOT NULL;
CREATE INDEX extraction_jobs_session ON extraction_jobs(session_key);

-- A deleted conversation leaves nothing waiting to be read by a model.
CREATE TRIGGER extraction_jobs_session_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM extraction_jobs WHERE session_key = old.key;
END;
"""
