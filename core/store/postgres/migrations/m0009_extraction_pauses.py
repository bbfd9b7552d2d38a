"""Extraction pauses as rows (core/commitments/pause.py): the first worker
to hit an authentication or unknown-model error pauses the agent for every
worker, and only it says so in the log."""

SQL = """
CREATE TABLE extraction_pauses (
    agent_id  text PRIMARY KEY,
    until     timestamptz NOT NULL,
    kind      text NOT NULL,
    error     text NOT NULL
);
"""
