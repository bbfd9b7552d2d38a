"""Rows ↔ records for the SQLite backend: times and column lists."""

from __future__ import annotations

import sqlite3
from typing import Any

from core.store.base import MessageRecord, SessionRecord
from core.store.dialect import from_ms, to_ms

__all__ = ["from_ms", "message_record", "session_record", "to_ms"]


SESSION_COLUMNS = (
    "id, key, agent_id, platform, chat_id, chat_kind, thread_id, created_at, updated_at"
)
# `m` is messages, `s` its session.
MESSAGE_COLUMNS = (
    "m.id, m.session_id, s.key, m.role, m.kind, m.text, m.ts, m.sender_id, "
    "m.platform_message_id, m.in_reply_to, m.payload, m.active"
)


# Both follow the field order of the record dataclasses (see the column lists).
def session_record(row: sqlite3.Row | tuple[Any, ...]) -> SessionRecord:
    return SessionRecord(*row[:7], created_at=from_ms(row[7]), updated_at=from_ms(row[8]))


def message_record(row: sqlite3.Row | tuple[Any, ...]) -> MessageRecord:
    return MessageRecord(*row[:6], from_ms(row[6]), *row[7:11], active=bool(row[11]))
