"""Pairing (core/pairing): when a code's notice was last sent, so a stranger
who keeps writing is not sent it again with every message (whichever worker
answers), the age order the oldest requests give way in, and the users the
operator blocked."""

SQL = """
ALTER TABLE pairing_requests ADD COLUMN notified_at INTEGER;

CREATE INDEX pairing_requests_by_age ON pairing_requests (platform, created_at);

CREATE TABLE pairing_blocks (
    platform    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    username    TEXT,
    blocked_at  INTEGER NOT NULL,
    PRIMARY KEY (platform, user_id)
) WITHOUT ROWID;
"""
