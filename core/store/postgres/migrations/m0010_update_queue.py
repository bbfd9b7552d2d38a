"""The update queue (core/store/updates.py): platform updates the polling
worker hands to every worker.

A row is waiting (`done_at` NULL), claimed (`claimed_by` + `lease_until`) or
done (`done_at` set, payload dropped, kept for a day so the same update put
again is a no-op). `source` is the platform and bot (`telegram:4242`), `lane`
the chat: a lane's waiting rows go to one worker at a time, oldest first.
The lane is the platform's chat, not a session key: which agent (and so which
session) a chat belongs to is decided when the update is processed.

Indexes:
- update_queue_waiting: each lane's oldest waiting row (the claim), a lane's rows
- update_queue_worker:  a worker's claims (release at stop)
- update_queue_done:    the purge of done rows past their retention
"""

SQL = """
CREATE TABLE update_queue (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source       text NOT NULL,
    update_id    bigint NOT NULL,
    lane         text NOT NULL,
    payload      text NOT NULL,
    created_at   timestamptz NOT NULL,
    claimed_by   text,
    lease_until  timestamptz,
    done_at      timestamptz,
    UNIQUE (source, update_id)
);

CREATE INDEX update_queue_waiting ON update_queue(source, lane, id) WHERE done_at IS NULL;
CREATE INDEX update_queue_worker ON update_queue(claimed_by) WHERE claimed_by IS NOT NULL;
CREATE INDEX update_queue_done ON update_queue(source, done_at) WHERE done_at IS NOT NULL;
"""
