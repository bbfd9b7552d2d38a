"""Pairing (core/pairing): the codes given to unknown users in direct
messages, and the users the operator approved."""

SQL = """
CREATE TABLE pairing_requests (
    platform    text NOT NULL,
    user_id     text NOT NULL,
    code        text NOT NULL UNIQUE,
    username    text,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (platform, user_id)
);

CREATE TABLE paired_users (
    platform     text NOT NULL,
    user_id      text NOT NULL,
    username     text,
    approved_at  timestamptz NOT NULL,
    PRIMARY KEY (platform, user_id)
);
"""
