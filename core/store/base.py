"""The Store interface every backend implements (SQLite now, PostgreSQL later).

Records are plain frozen dataclasses; times are timezone-aware UTC datetimes.
A message and its full-text row are always written in one transaction.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Self

from core.messages import ChatKind

Role = Literal["user", "assistant", "tool", "system"]

# Kinds of message rows. Only the INDEXED_KINDS of user/assistant rows get a
# full-text row: tool calls, tool results, reasoning and images never do.
MessageKind = Literal[
    "text", "tool_call", "tool_result", "reasoning", "image", "error", "checkin", "reminder"
]
INDEXED_ROLES: frozenset[str] = frozenset({"user", "assistant"})
INDEXED_KINDS: frozenset[str] = frozenset({"text", "checkin", "reminder"})


def is_indexed(role: str, kind: str) -> bool:
    return role in INDEXED_ROLES and kind in INDEXED_KINDS


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: int
    key: str
    agent_id: str
    platform: str
    chat_id: str
    chat_kind: ChatKind
    thread_id: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to store. `in_reply_to` links an assistant reply to the user
    message it answers, which is how unanswered messages are found after a crash."""

    session_key: str
    role: Role
    text: str
    ts: datetime
    kind: MessageKind = "text"
    sender_id: str | None = None
    platform_message_id: str | None = None
    in_reply_to: int | None = None
    # JSON for tool calls / tool results (the OpenAI message shape), else None.
    payload: str | None = None


@dataclass(frozen=True, slots=True)
class MessageRecord:
    id: int
    session_id: int
    session_key: str
    role: Role
    kind: MessageKind
    text: str
    ts: datetime
    sender_id: str | None
    platform_message_id: str | None
    in_reply_to: int | None
    payload: str | None
    active: bool


class DuplicateMessage(Exception):
    """The platform message was stored before (same platform, chat and id)."""


class UnknownSession(LookupError):
    """A message was added to a session key that `ensure_session` never created."""


class Store(abc.ABC):
    """Async persistence for sessions and transcripts."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations in a transaction."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @abc.abstractmethod
    async def schema_version(self) -> int: ...

    @abc.abstractmethod
    async def ensure_session(
        self,
        key: str,
        *,
        agent_id: str,
        platform: str,
        chat_id: str,
        chat_kind: ChatKind,
        thread_id: str | None,
        now: datetime,
    ) -> SessionRecord:
        """Return the session with this key, creating it when missing."""

    @abc.abstractmethod
    async def get_session(self, key: str) -> SessionRecord | None: ...

    @abc.abstractmethod
    async def add_message(self, message: NewMessage) -> MessageRecord:
        """Store a message (and its full-text row when indexed) in one transaction.

        The session must exist. Raises DuplicateMessage when a user message
        with the same platform, chat and platform message id is already stored.
        """

    @abc.abstractmethod
    async def set_platform_message_id(self, message_id: int, platform_message_id: str) -> None:
        """Record the id the platform gave a message we sent."""

    @abc.abstractmethod
    async def history(
        self, session_key: str, *, before_turn_of: int, limit: int
    ) -> list[MessageRecord]:
        """Active messages of a session that precede the turn of message
        `before_turn_of`, oldest first, at most `limit` of the latest ones.

        Replies sort directly after the message they answer, so a turn queued
        behind another sees the earlier exchange in conversation order.
        """

    @abc.abstractmethod
    async def unanswered(self, *, since: datetime) -> list[MessageRecord]:
        """User text messages at or after `since` that no stored reply answers,
        oldest first."""

    @abc.abstractmethod
    async def get_message(self, message_id: int) -> MessageRecord | None: ...

    @abc.abstractmethod
    async def search_text(
        self, query: str, *, session_key: str | None, limit: int
    ) -> list[MessageRecord]:
        """Messages whose indexed text matches every word of `query` (plain text,
        never FTS syntax), best first. A foundation-level search; the search
        package builds richer queries on top of the same index."""

    @abc.abstractmethod
    async def count_index_rows(self, session_key: str | None = None) -> int:
        """Full-text rows (for consistency checks)."""
