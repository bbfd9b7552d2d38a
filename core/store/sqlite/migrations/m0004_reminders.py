"""Step 4, reminders (core/store/migration_ddl.py), in SQLite's words, with
SQLite's own indexes and trigger:

- reminders_due:     "what is due now" and "when is the next one" for the
                     scheduler: status = 'active' AND next_fire_at <= T, walked
                     in next_fire_at order, so finding due work costs the due
                     rows, not the table
- reminders_claimed: claims left by a crash, looked up at start-up
"""

from core.store.dialect import SQLITE
from core.store.migration_ddl import REMINDERS

_DUE_INDEX = "CREATE INDEX reminders_due ON reminders(status, next_fire_at);"

_OWN = """
CREATE INDEX reminders_claimed ON reminders(claimed_at) WHERE claimed_at IS NOT NULL;

-- A deleted conversation takes its reminders along in the same transaction:
-- nothing may be delivered into a chat whose history the user wiped.
CREATE TRIGGER reminders_session_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM reminders WHERE session_key = old.key;
END;
"""

SQL = SQLITE.ddl(REMINDERS, due_index=_DUE_INDEX) + _OWN
