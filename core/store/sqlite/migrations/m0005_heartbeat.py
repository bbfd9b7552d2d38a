"""Heartbeat delivery state.

- commitments.claimed_at: set in the transaction that claims a delivery,
  cleared when its outcome is recorded. A claim still set at start-up means
  the process died between send and confirm: the outcome is unknown, and the
  commitment is failed rather than sent twice.
- heartbeat_turns: when each agent session last had a heartbeat turn, so
  "at most one turn per interval" survives a restart.
"""

SQL = """
ALTER TABLE commitments ADD COLUMN claimed_at INTEGER;

CREATE INDEX commitments_claimed ON commitments(claimed_at) WHERE claimed_at IS NOT NULL;

CREATE TABLE heartbeat_turns (
    agent_id     TEXT NOT NULL,
    session_key  TEXT NOT NULL,
    last_turn_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, session_key)
) WITHOUT ROWID;

CREATE TRIGGER heartbeat_turns_session_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM heartbeat_turns WHERE session_key = old.key;
END;
"""
