"""Step 1, transcript: sessions and messages (core/store/migration_ddl.py),
and the full-text index, in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import TRANSCRIPT

_OWN = """
CREATE INDEX messages_user_ts ON messages(ts) WHERE role = 'user';

-- A regular (not contentless) FTS5 table: SQLite 3.40 has no contentless_delete,
-- and rows must be deletable when their messages go. rowid = messages.id;
-- body holds normalize(text).
CREATE VIRTUAL TABLE messages_fts USING fts5(
    body,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Every transaction flushes a new FTS5 segment; merging them less eagerly
-- (default 4) is the largest single saving per add_message, at the cost of
-- a query touching a few more segments. Persisted in the table's config.
INSERT INTO messages_fts(messages_fts, rank) VALUES ('automerge', 8);

-- Also fires for rows removed by the sessions ON DELETE CASCADE.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;

-- Every new message marks its session as recently used, in the same
-- statement as the insert, so no code path can forget it and add_message
-- saves a round trip to the database thread.
CREATE TRIGGER messages_touch_session AFTER INSERT ON messages BEGIN
    UPDATE sessions SET updated_at = max(updated_at, new.ts) WHERE id = new.session_id;
END;
"""

_ACTIVE = "INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))"
SQL = SQLITE.ddl(TRANSCRIPT, active=_ACTIVE, more_session_columns="") + _OWN
