"""Step 21, limits (core/store/migration_ddl.py), in PostgreSQL's words; and
the kinds of user rows the index holds gain `limited` (a message kept but
not answered: core/limits/admission.py), for rows shown again after hiding."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import LIMITS

# Kept literal, as in step 2: a test checks them against INDEXED_KINDS.
ROLES_SQL = "('user', 'assistant')"
KINDS_SQL = "('text', 'checkin', 'reminder', 'limited')"

SQL = (
    POSTGRES.ddl(LIMITS)
    + f"""
CREATE OR REPLACE FUNCTION messages_search_visibility() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.active AND NOT NEW.active THEN
        DELETE FROM message_search WHERE message_id = OLD.id;
    ELSIF NOT OLD.active AND NEW.active
        AND NEW.role IN {ROLES_SQL} AND NEW.kind IN {KINDS_SQL} THEN
        UPDATE sessions SET index_behind = true WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END $$;
"""
)
