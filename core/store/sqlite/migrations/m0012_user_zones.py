"""Each user's own time zone (core/users), one row per (platform, user id)."""

SQL = """
CREATE TABLE user_zones (
    platform    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (platform, user_id)
) WITHOUT ROWID;
"""
