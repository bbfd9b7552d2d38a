"""Sessions, messages and the full-text index."""

# Times are INTEGER milliseconds since the Unix epoch, UTC.
SQL = """
CREATE TABLE sessions (
    id          INTEGER PRIMARY KEY,
    key         TEXT NOT NULL UNIQUE,
    agent_id    TEXT NOT NULL,
    platform    TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    chat_kind   TEXT NOT NULL,
    thread_id   TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- platform and chat_id are copied from the session so the duplicate check
-- below can be a plain unique index.
CREATE TABLE messages (
    id                   INTEGER PRIMARY KEY,
    session_id           INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    platform             TEXT NOT NULL,
    chat_id              TEXT NOT NULL,
    role                 TEXT NOT NULL,
    kind                 TEXT NOT NULL,
    text                 TEXT NOT NULL,
    payload              TEXT,
    sender_id            TEXT,
    platform_message_id  TEXT,
    in_reply_to          INTEGER REFERENCES messages(id) ON DELETE SET NULL,
    ts                   INTEGER NOT NULL,
    active               INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))
);

CREATE INDEX messages_session ON messages(session_id, id);

-- history(): a turn's replies sort right after the user message that started
-- it, so the range scan runs on the turn number, not on the id.
CREATE INDEX messages_session_turn ON messages(session_id, coalesce(in_reply_to, id), id);

-- unanswered() and ON DELETE SET NULL look replies up by the message they answer.
CREATE INDEX messages_in_reply_to ON messages(in_reply_to);

-- A platform update delivered twice must not start two turns.
CREATE UNIQUE INDEX messages_platform_dedupe
    ON messages(platform, chat_id, platform_message_id)
    WHERE role = 'user' AND platform_message_id IS NOT NULL;

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
