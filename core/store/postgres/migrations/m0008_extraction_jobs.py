"""The extraction queue as rows (core/commitments/jobs.py), as on SQLite:
exchanges waiting for the extraction pass survive a stop or a crash, and any
worker may adopt the ones nobody vouches for."""

SQL = """
CREATE TABLE extraction_jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id         text NOT NULL,
    session_key      text NOT NULL,
    platform         text NOT NULL,
    chat_id          text NOT NULL,
    thread_id        text,
    sender_id        text,
    chat_kind        text NOT NULL,
    user_message_id  bigint NOT NULL,
    user_text        text NOT NULL,
    assistant_text   text NOT NULL,
    created_at       timestamptz NOT NULL,
    -- NULL claimed_by: released, any worker may take it.
    claimed_by       text,
    lease_until      timestamptz
);

-- Orphans in queue order: released ones (no lease) first, then by lease end.
CREATE INDEX extraction_jobs_lease ON extraction_jobs(lease_until NULLS FIRST, id);
CREATE INDEX extraction_jobs_worker ON extraction_jobs(claimed_by) WHERE claimed_by IS NOT NULL;
CREATE INDEX extraction_jobs_session ON extraction_jobs(session_key);

-- A deleted conversation leaves nothing waiting to be read by a model.
CREATE FUNCTION sessions_delete_extraction_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM extraction_jobs WHERE session_key = OLD.key;
    RETURN NULL;
END $$;

CREATE TRIGGER sessions_delete_extraction_jobs AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_delete_extraction_jobs();
"""
