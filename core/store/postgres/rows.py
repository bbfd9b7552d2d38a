"""Rows ↔ records for the PostgreSQL backend: times and column lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.store.base import INDEXED_KINDS, INDEXED_ROLES, MessageRecord, SessionRecord
from core.store.dialect import utc

__all__ = ["message_record", "session_record", "utc"]

SESSION_COLUMNS = (
    "s.id, s.key, s.agent_id, s.platform, s.chat_id, s.chat_kind, s.thread_id, "
    "s.created_at, s.updated_at"
)
# `m` is messages, `s` its session.
MESSAGE_COLUMNS = (
    "m.id, m.session_id, s.key, m.role, m.kind, m.text, m.ts, m.sender_id, "
    "m.platform_message_id, m.in_reply_to, m.payload, m.active"
)

_IN_ROLES = f"({', '.join(repr(r) for r in sorted(INDEXED_ROLES))})"
_IN_KINDS = f"({', '.join(repr(k) for k in sorted(INDEXED_KINDS))})"
# `m` is an active message that has (or should have) a search row.
INDEXED_SQL = f"m.role IN {_IN_ROLES} AND m.kind IN {_IN_KINDS}"


# Both follow the field order of the record dataclasses (see the column lists).
# psycopg returns timestamptz in the session's zone (UTC, as a ZoneInfo);
# records carry datetime.UTC like the SQLite backend's.
def session_record(row: Sequence[Any]) -> SessionRecord:
    return SessionRecord(*row[:7], created_at=utc(row[7]), updated_at=utc(row[8]))


def message_record(row: Sequence[Any]) -> MessageRecord:
    return MessageRecord(*row[:6], utc(row[6]), *row[7:11], active=bool(row[11]))
