"""Session search: one `message_search` row per active indexed message,
holding its tsvector (built in Python by core/store/postgres/lexemes.py),
under a GIN index.

A table of its own rather than a column of `messages`: updating a message
row for anything else (the platform id recorded after a send) would then
write every lexeme into the GIN index again. Rows carry their session id,
so a session search filters them without a join (and a later sharding by
session finds it on every row).

Only active messages have a row: hiding one drops it in the same statement;
showing it again puts its session behind, to be rebuilt by the reconciler
(SQL cannot build the lexemes). Deleting a message or a session takes its
row along (ON DELETE CASCADE).
"""

# Kept literal (not built from core.store.base) so this migration means the
# same thing forever; a test checks them against INDEXED_ROLES/INDEXED_KINDS.
ROLES_SQL = "('user', 'assistant')"
KINDS_SQL = "('text', 'checkin', 'reminder')"

SQL = f"""
CREATE TABLE message_search (
    message_id  bigint PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    session_id  bigint NOT NULL,
    search      tsvector NOT NULL
);

CREATE INDEX message_search_words ON message_search USING gin (search);
CREATE INDEX message_search_session ON message_search(session_id, message_id);

CREATE FUNCTION messages_search_visibility() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.active AND NOT NEW.active THEN
        DELETE FROM message_search WHERE message_id = OLD.id;
    ELSIF NOT OLD.active AND NEW.active
        AND NEW.role IN {ROLES_SQL} AND NEW.kind IN {KINDS_SQL} THEN
        UPDATE sessions SET index_behind = true WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER messages_search_visibility AFTER UPDATE OF active ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_search_visibility();
"""
