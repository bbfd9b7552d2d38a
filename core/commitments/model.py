"""A commitment: one short-lived follow-up the bot may bring up later, in one scope.

The scope (agent, session, platform, chat, thread, sender) is always copied
from the stored conversation session, never from model output: it decides
where a follow-up may ever be delivered.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from core.clock import iso_utc
from core.messages import ChatKind, parse_session_key, storable
from core.users.store import FollowUpSubject

Status = Literal["pending", "snoozed", "sent", "dismissed", "resolved", "expired", "failed"]
Kind = Literal["event_check_in", "deadline_check", "care_check_in", "open_loop"]
Sensitivity = Literal["routine", "personal", "care"]
Source = Literal["inferred_user_context", "agent_promise"]

STATUSES: tuple[Status, ...] = get_args(Status)

# Active commitments can still be delivered, dismissed, snoozed, merged or
# expired; every other status is final.
ACTIVE_STATUSES: tuple[Status, ...] = ("pending", "snoozed")

ID_PREFIX = "cm_"


def new_commitment_id() -> str:
    """`cm_` + 12 hex digits (48 random bits): short enough to type in a
    slash command, and the primary key rejects the rare collision."""
    return ID_PREFIX + secrets.token_hex(6)


@dataclass(frozen=True, slots=True)
class Scope:
    """Exactly where a commitment came from and may be delivered back to.

    The session key already names agent, platform, chat kind, chat and
    thread; they are kept as separate fields so the heartbeat can build its
    Target and check access without parsing keys, and so every query can
    check them. `chat_kind` follows from the session key, so it takes no part
    in equality: a scope is the same wherever it was read from.
    """

    agent_id: str
    session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    sender_id: str | None
    chat_kind: ChatKind = field(kw_only=True, compare=False)

    @property
    def subject(self) -> FollowUpSubject:
        """Whom the scope is about, where: what follow-up preferences are read by."""
        return FollowUpSubject(self.agent_id, self.platform, self.sender_id, self.session_key)


def _stored_chat_kind(session_key: str, chat_id: str, sender_id: str | None) -> ChatKind:
    """The chat kind of a stored commitment's scope, as its session key names it.

    A commitment row keeps the chat kind only in its session key (a column
    would repeat it). kept writes no key that does not parse; such a row
    counts as a private chat only when the chat is the sender's own.
    """
    try:
        return parse_session_key(session_key).chat_kind
    except ValueError:
        return "private" if chat_id == sender_id else "group"


@dataclass(frozen=True, slots=True)
class NewCommitment:
    """A candidate that passed every rule, ready to be stored or merged."""

    scope: Scope
    kind: Kind
    sensitivity: Sensitivity
    source: Source
    reason: str
    suggested_text: str
    dedupe_key: str
    confidence: float
    due_earliest: datetime
    due_latest: datetime
    due_timezone: str
    source_message_id: int | None
    created_at: datetime

    def __post_init__(self) -> None:
        # The extraction model's words: made storable like every text (core.messages).
        for name in ("reason", "suggested_text", "dedupe_key"):
            object.__setattr__(self, name, storable(getattr(self, name)))


@dataclass(frozen=True, slots=True)
class Commitment:
    id: str
    agent_id: str
    session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    sender_id: str | None
    kind: Kind
    sensitivity: Sensitivity
    source: Source
    status: Status
    reason: str
    suggested_text: str
    dedupe_key: str
    confidence: float
    due_earliest: datetime
    due_latest: datetime
    due_timezone: str
    source_message_id: int | None
    created_at: datetime
    updated_at: datetime
    attempts: int = 0
    last_error: str | None = None
    sent_at: datetime | None = None
    sent_message_id: str | None = None
    dismissed_at: datetime | None = None
    snoozed_until: datetime | None = None
    expired_at: datetime | None = None
    resolved_at: datetime | None = None

    @property
    def scope(self) -> Scope:
        return Scope(
            self.agent_id,
            self.session_key,
            self.platform,
            self.chat_id,
            self.thread_id,
            self.sender_id,
            chat_kind=_stored_chat_kind(self.session_key, self.chat_id, self.sender_id),
        )

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES


def to_json(c: Commitment) -> dict[str, Any]:
    """The `kept commitments --json` item: exactly these keys, no others."""
    return {
        "id": c.id,
        "agentId": c.agent_id,
        "sessionKey": c.session_key,
        "platform": c.platform,
        "chatId": c.chat_id,
        "threadId": c.thread_id,
        "senderId": c.sender_id,
        "kind": c.kind,
        "status": c.status,
        "dueEarliest": iso_utc(c.due_earliest),
        "dueLatest": iso_utc(c.due_latest),
        "suggestedText": c.suggested_text,
        "reason": c.reason,
        "confidence": c.confidence,
        "createdAt": iso_utc(c.created_at),
        "sentAt": iso_utc(c.sent_at),
    }
