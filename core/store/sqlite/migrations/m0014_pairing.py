"""Pairing (core/pairing): the codes given to unknown users in direct
messages, and the users the operator approved."""

SQL = """
CREATE TABLE pairing_requests (
    platform    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    code        TEXT NOT NULL UNIQUE,
    username    TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (platform, user_id)
) WITHOUT ROWID;

CREATE TABLE paired_users (
    platform     TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    username     TEXT,
    approved_at  INTEGER NOT NULL,
    PRIMARY KEY (platform, user_id)
) WITHOUT ROWID;
"""
