"""Step 1, transcript: sessions and messages (core/store/migration_ddl.py),
in PostgreSQL's words.

Times are `timestamptz` (UTC). Every row that belongs to a session carries
its key or id, so a later move to a PostgreSQL sharded by session (Citus)
needs no new columns.
"""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import TRANSCRIPT

_INDEX_BEHIND = """,
    index_behind  boolean NOT NULL DEFAULT false"""

_OWN = """
CREATE INDEX sessions_agent ON sessions(agent_id);
CREATE INDEX sessions_index_behind ON sessions(id) WHERE index_behind;

CREATE INDEX messages_sent_platform_id ON messages(platform, chat_id, platform_message_id)
    WHERE role <> 'user' AND platform_message_id IS NOT NULL;

CREATE INDEX messages_user_ts ON messages(ts) WHERE role = 'user';

-- Every new message marks its session as recently used, in the insert's own
-- statement, so no code path can forget it. Once per statement, so a bulk
-- import's multi-row insert updates each of its sessions once.
CREATE FUNCTION messages_touch_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sessions s SET updated_at = greatest(s.updated_at, n.ts)
    FROM (SELECT session_id, max(ts) AS ts FROM new_messages GROUP BY session_id) n
    WHERE s.id = n.session_id;
    RETURN NULL;
END $$;

CREATE TRIGGER messages_touch_session AFTER INSERT ON messages
    REFERENCING NEW TABLE AS new_messages
    FOR EACH STATEMENT EXECUTE FUNCTION messages_touch_session();
"""

_ACTIVE = "boolean NOT NULL DEFAULT true"
SQL = POSTGRES.ddl(TRANSCRIPT, active=_ACTIVE, more_session_columns=_INDEX_BEHIND) + _OWN
