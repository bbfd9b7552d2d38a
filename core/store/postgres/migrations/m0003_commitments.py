"""Step 3, commitments (core/store/migration_ddl.py), in PostgreSQL's words,
and the trigger that deletes a session's follow-up state with it."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import COMMITMENTS
from core.store.postgres.migrations import delete_with_session

_OWN = f"""
-- A deleted session takes its follow-up state along in the same
-- transaction: reasons quote the conversation, and nothing may be delivered
-- into a conversation that no longer exists. A trigger, not a foreign key:
-- a commitment may name a session key before (or without) a session row, as
-- on SQLite. Steps 4 and 5 extend the function to reminders and heartbeat
-- turns.
{delete_with_session("sessions_delete_followups", "commitments")}

CREATE TRIGGER sessions_delete_followups AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_delete_followups();
"""

SQL = POSTGRES.ddl(COMMITMENTS) + _OWN
