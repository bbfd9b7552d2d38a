"""Pairing (core/pairing): when a code's notice was last sent, so a stranger
who keeps writing is not sent it again with every message (whichever worker
answers), the age order the oldest requests give way in, and the users the
operator blocked."""

SQL = """
ALTER TABLE pairing_requests ADD COLUMN notified_at timestamptz;

CREATE INDEX pairing_requests_by_age ON pairing_requests (platform, created_at);

CREATE TABLE pairing_blocks (
    platform    text NOT NULL,
    user_id     text NOT NULL,
    username    text,
    blocked_at  timestamptz NOT NULL,
    PRIMARY KEY (platform, user_id)
);
"""
