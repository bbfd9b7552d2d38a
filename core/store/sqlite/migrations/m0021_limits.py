"""Step 21, limits (core/store/migration_ddl.py), in SQLite's words; and
the kinds of user rows the index holds gain `limited` (a message kept but
not answered: core/limits/admission.py), for rows shown again after hiding."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import LIMITS

# Kept literal, as in step 2: a test checks them against INDEXED_KINDS.
ROLES_SQL = "('user', 'assistant')"
KINDS_SQL = "('text', 'checkin', 'reminder', 'limited')"

SQL = (
    SQLITE.ddl(LIMITS)
    + f"""
DROP TRIGGER messages_fts_show;

CREATE TRIGGER messages_fts_show AFTER UPDATE OF active ON messages
WHEN old.active = 0 AND new.active = 1
    AND new.role IN {ROLES_SQL} AND new.kind IN {KINDS_SQL} BEGIN
    UPDATE sessions SET index_behind = 1 WHERE id = new.session_id;
END;
"""
)
