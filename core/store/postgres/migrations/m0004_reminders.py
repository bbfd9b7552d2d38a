"""Step 4, reminders (core/store/migration_ddl.py), in PostgreSQL's words,
with its own due index: reminders_due holds active, unclaimed reminders by
fire time, only the rows that can fire (finished and in-flight ones never
enter it)."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import REMINDERS
from core.store.postgres.migrations import delete_with_session

_DUE_INDEX = """
CREATE INDEX reminders_due ON reminders(next_fire_at)
    WHERE status = 'active' AND claimed_at IS NULL;"""

_OWN = f"""
-- A deleted conversation takes its reminders along in the same transaction:
-- nothing may be delivered into a chat whose history the user wiped.
{delete_with_session("sessions_delete_followups", "commitments", "reminders")}
"""

SQL = POSTGRES.ddl(REMINDERS, due_index=_DUE_INDEX) + _OWN
