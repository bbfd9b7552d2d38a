"""Extraction pauses as rows (core/commitments/pause.py): one per agent,
kept across restarts like the pause itself."""

SQL = """
CREATE TABLE extraction_pauses (
    agent_id  TEXT PRIMARY KEY,
    until     INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    error     TEXT NOT NULL
);
"""
