"""Small named values the bot keeps about itself (core/store/app_state.py),
e.g. the hash of the Discord command tree last synced."""

SQL = """
CREATE TABLE app_state (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
"""
