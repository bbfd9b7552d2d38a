"""StoredChats in SQL written once: each session with its counts, for the
operator's `kept sessions list`."""

from __future__ import annotations

from core.privacy.store import ChatSummary, StoredChats
from core.store.sql.database import Database

_SELECT = (
    "SELECT s.key, s.chat_kind, count(DISTINCT m.sender_id), count(m.id), min(m.ts), max(m.ts) "
    "FROM sessions s LEFT JOIN messages m ON m.session_id = s.id"
)
# A member's chats, found as an erasure finds them (core/store/sql/erasure.py).
_OF_MEMBER = (
    " WHERE s.platform = ? AND ((s.chat_kind = 'private' AND s.chat_id = ?) OR EXISTS "
    "(SELECT 1 FROM messages x WHERE x.session_id = s.id AND x.sender_id = ?))"
)
_ORDER = " GROUP BY s.id, s.key, s.chat_kind ORDER BY max(m.ts) DESC NULLS LAST, s.key"


class SqlStoredChats(StoredChats):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d = db.dialect

    async def chats(self, member: tuple[str, str] | None = None) -> list[ChatSummary]:
        sql, params = _SELECT + _ORDER, ()
        if member is not None:
            platform, user_id = member
            sql = _SELECT + _OF_MEMBER + _ORDER
            params = (platform, user_id, user_id)
        rows = await self._db.query(sql, params)
        return [
            ChatSummary(
                str(key), kind, int(members), int(messages),
                self._d.from_maybe_time(first), self._d.from_maybe_time(last),
            )
            for key, kind, members, messages, first, last in rows
        ]  # fmt: skip
