"""Step 3, commitments (core/store/migration_ddl.py), in SQLite's words, and
the trigger that deletes a session's commitments with it."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import COMMITMENTS

_OWN = """
-- A deleted session takes its commitments along in the same transaction:
-- their reasons quote the conversation, and nothing may be delivered into a
-- conversation that no longer exists.
CREATE TRIGGER commitments_session_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM commitments WHERE session_key = old.key;
END;
"""

SQL = SQLITE.ddl(COMMITMENTS) + _OWN
