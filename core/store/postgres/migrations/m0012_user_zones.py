"""Each user's own time zone (core/users), one row per (platform, user id)."""

SQL = """
CREATE TABLE user_zones (
    platform    text NOT NULL,
    user_id     text NOT NULL,
    timezone    text NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (platform, user_id)
);
"""
