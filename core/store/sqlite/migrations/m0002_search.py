"""Session search: a multilingual full-text table, index-behind tracking,
triggers that keep the index in step with deletions, and the lookup used by
platform edits and deletions.

The old single-column `messages_fts` is replaced and refilled from the stored
messages by `upgrade`, in this migration's transaction.
"""

from __future__ import annotations

import aiosqlite

from core.store.sqlite.fts import TOKENIZE, index_values

# Kept literal (not built from core.store.base) so this migration means the
# same thing forever; a test checks them against INDEXED_ROLES/INDEXED_KINDS.
ROLES_SQL = "('user', 'assistant')"
KINDS_SQL = "('text', 'checkin', 'reminder')"

SQL = f"""
DROP TRIGGER messages_fts_delete;
DROP TABLE messages_fts;

-- words / grams / session: see core/store/sqlite/fts.py. A regular (not contentless)
-- FTS5 table: SQLite 3.40 has no contentless_delete, and rows must be
-- deletable when their messages go.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    words, grams, session,
    tokenize = "{TOKENIZE}"
);

-- Every transaction flushes a new FTS5 segment; merging them less eagerly
-- (default 4) is the largest single saving per add_message.
INSERT INTO messages_fts(messages_fts, rank) VALUES ('automerge', 8);

-- Also fires for rows removed by the sessions ON DELETE CASCADE, so a
-- message and its index row always leave in the same transaction.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;

-- Only active messages are indexed: hiding one drops its row; showing it
-- again puts its session behind, to be rebuilt by the reconciler (SQL cannot
-- compute the row's columns).
CREATE TRIGGER messages_fts_hide AFTER UPDATE OF active ON messages
WHEN old.active = 1 AND new.active = 0 BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;

CREATE TRIGGER messages_fts_show AFTER UPDATE OF active ON messages
WHEN old.active = 0 AND new.active = 1
    AND new.role IN {ROLES_SQL} AND new.kind IN {KINDS_SQL} BEGIN
    UPDATE sessions SET index_behind = 1 WHERE id = new.session_id;
END;

-- 1 while the session has messages (imported, or shown again) whose
-- full-text rows have not been built yet.
ALTER TABLE sessions ADD COLUMN index_behind INTEGER NOT NULL DEFAULT 0
    CHECK (index_behind IN (0, 1));
CREATE INDEX sessions_index_behind ON sessions(id) WHERE index_behind = 1;

-- "Does this agent own every session?" in two probes (min and max), so an
-- agent-wide search of a single-agent bot needs no per-hit filter.
CREATE INDEX sessions_agent ON sessions(agent_id);

-- Platform edits and deletions name a message by its platform id. User
-- messages are found through the unique index of migration 0001; this one
-- covers the rest (the bot's own replies, whose id is recorded after the
-- send), so add_message pays for no second index on every user message.
CREATE INDEX messages_sent_platform_id ON messages(platform, chat_id, platform_message_id)
    WHERE platform_message_id IS NOT NULL AND role <> 'user';
"""

_BATCH = 5000

# This migration's row layout (rowid = message id); 0006 moves rows into
# per-agent rowid ranges.
INSERT = "INSERT INTO messages_fts(rowid, words, grams, session) VALUES (?, ?, ?, ?)"


async def upgrade(db: aiosqlite.Connection) -> None:
    """Index every active indexed message that migration 0001 stored."""
    last = 0
    while True:
        rows = list(
            await db.execute_fetchall(
                f"SELECT id, session_id, text FROM messages WHERE id > ? AND active = 1 "
                f"AND role IN {ROLES_SQL} AND kind IN {KINDS_SQL} ORDER BY id LIMIT ?",
                (last, _BATCH),
            )
        )
        if not rows:
            return
        await db.executemany(INSERT, [(id_, *index_values(text, sid)) for id_, sid, text in rows])
        last = rows[-1][0]
