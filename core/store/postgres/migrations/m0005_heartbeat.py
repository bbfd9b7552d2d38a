"""Heartbeat delivery state.

- commitments.claimed_at: set in the transaction that claims a delivery,
  cleared when its outcome is recorded (step 7 gives claims a phase, an
  owner and a lease).
- heartbeat_turns: when each agent session last had a heartbeat turn, so
  "at most one turn per interval" survives a restart.
"""

from core.store.postgres.migrations import delete_with_session

SQL = f"""
ALTER TABLE commitments ADD COLUMN claimed_at timestamptz;

CREATE TABLE heartbeat_turns (
    agent_id      text NOT NULL,
    session_key   text NOT NULL,
    last_turn_at  timestamptz NOT NULL,
    PRIMARY KEY (session_key, agent_id)
);

{delete_with_session("sessions_delete_followups", "commitments", "reminders", "heartbeat_turns")}
"""
