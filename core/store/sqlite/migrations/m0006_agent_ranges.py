"""Per-agent rowid ranges in the full-text index.

An agent-wide search used to look up every candidate's message and session
to drop other agents' rows: about two microseconds per candidate, twice the
cost of the full-text match itself. Now each agent has a small number, its
slot (table `agents`), and its messages' index rows live at rowids
`slot * 2^40 + message id`. An agent's search is then a rowid range, which
FTS5 seeks to in every posting list, and it never reads another agent's
rows (core/store/sqlite/fts.py).

- `agents` gives each agent id a slot, in order of first appearance;
  `sessions.agent_slot` copies it, set by a trigger on every new session
  (ensure_session, imports, anything else that inserts one).
- The index rows move to their ranges in SQL, copying their columns as they
  are (no re-normalisation); rows whose message is gone are left behind.
- `sessions_agent` (migration 0002) goes: its one query is gone.
- Deleting a message or hiding it finds its row through its session's slot.
  A session's delete removes its messages' rows in a BEFORE trigger: by the
  time ON DELETE CASCADE deletes the messages, the session row (and with it
  the slot) is gone.
"""

from core.store.sqlite.fts import TOKENIZE

SPAN = 1 << 40

SQL = f"""
CREATE TABLE agents (
    slot     INTEGER PRIMARY KEY,
    agent_id TEXT NOT NULL UNIQUE
);
INSERT INTO agents(agent_id) SELECT agent_id FROM sessions GROUP BY agent_id ORDER BY min(id);

ALTER TABLE sessions ADD COLUMN agent_slot INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET agent_slot = (SELECT slot FROM agents a WHERE a.agent_id = sessions.agent_id);

CREATE TRIGGER sessions_agent_slot AFTER INSERT ON sessions BEGIN
    INSERT OR IGNORE INTO agents(agent_id) VALUES (new.agent_id);
    UPDATE sessions SET agent_slot = (SELECT slot FROM agents WHERE agent_id = new.agent_id)
    WHERE id = new.id;
END;

CREATE VIRTUAL TABLE messages_fts_ranged USING fts5(
    words, grams, session,
    tokenize = "{TOKENIZE}"
);
INSERT INTO messages_fts_ranged(messages_fts_ranged, rank) VALUES ('automerge', 8);
INSERT INTO messages_fts_ranged(rowid, words, grams, session)
    SELECT s.agent_slot * {SPAN} + f.rowid, f.words, f.grams, f.session
    FROM messages_fts f CROSS JOIN messages m ON m.id = f.rowid
    CROSS JOIN sessions s ON s.id = m.session_id
    ORDER BY 1;

DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_hide;
DROP TABLE messages_fts;
ALTER TABLE messages_fts_ranged RENAME TO messages_fts;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts
    WHERE rowid = (SELECT agent_slot FROM sessions WHERE id = old.session_id) * {SPAN} + old.id;
END;

CREATE TRIGGER messages_fts_hide AFTER UPDATE OF active ON messages
WHEN old.active = 1 AND new.active = 0 BEGIN
    DELETE FROM messages_fts
    WHERE rowid = (SELECT agent_slot FROM sessions WHERE id = old.session_id) * {SPAN} + old.id;
END;

-- Served only the "does one agent own every session?" probe, which the
-- ranges replace.
DROP INDEX sessions_agent;

CREATE TRIGGER sessions_fts_delete BEFORE DELETE ON sessions BEGIN
    DELETE FROM messages_fts
    WHERE rowid IN (SELECT old.agent_slot * {SPAN} + id FROM messages WHERE session_id = old.id);
END;
"""
