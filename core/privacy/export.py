"""What kept holds from or about one user, as one JSON document (the
schema is in the README): their private chats whole; in shared chats only
their own messages and the bot's replies to them; their follow-ups,
reminders, queued exchanges and settings; the record of each model call
made for them (tokens, no words). Nothing of anyone else's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from core.clock import iso_utc

if TYPE_CHECKING:
    from core.store.base import MessageRecord

EXPORT_KIND = "kept-user-export"
EXPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class ExportedMessage:
    id: int
    role: str
    kind: str
    sender_id: str | None
    ts: datetime
    text: str
    in_reply_to: int | None
    active: bool


@dataclass(frozen=True, slots=True)
class ExportedChat:
    key: str
    agent_id: str
    kind: str
    chat_id: str
    thread_id: str | None
    messages: list[ExportedMessage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ExportedFollowUp:
    id: str
    session_key: str
    kind: str
    status: str
    reason: str
    suggested_text: str
    due_earliest: datetime
    due_latest: datetime
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ExportedReminder:
    id: str
    session_key: str
    text: str
    kind: str
    cron: str | None
    timezone: str
    next_fire_at: datetime | None
    status: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ExportedExchange:
    """An exchange waiting for the extraction model."""

    session_key: str
    user_text: str
    assistant_text: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ExportedFollowUpSwitch:
    """The user's own follow-up preference under one agent."""

    agent_id: str
    enabled: bool
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ExportedUsage:
    """One model call made for the user: what `kept usage` counts."""

    at: datetime
    agent_id: str
    role: str
    model: str
    chat_id: str | None
    tokens_in: int
    tokens_out: int
    estimated: bool


@dataclass(frozen=True, slots=True)
class UserExport:
    platform: str
    user_id: str
    chats: list[ExportedChat]
    follow_ups: list[ExportedFollowUp]
    reminders: list[ExportedReminder]
    queued: list[ExportedExchange]
    timezone: str | None
    paired: bool
    # Their own follow-up switch per agent that has one (none: on everywhere).
    followups: list[ExportedFollowUpSwitch] = field(default_factory=list)
    # The model calls made for them (limits and `kept usage`), oldest first.
    usage: list[ExportedUsage] = field(default_factory=list)


def message_json(m: ExportedMessage | MessageRecord) -> dict[str, Any]:
    """One message as the export (and `kept sessions show --json`) writes it."""
    return {
        "id": m.id,
        "role": m.role,
        "kind": m.kind,
        "senderId": m.sender_id,
        "ts": iso_utc(m.ts),
        "text": m.text,
        "inReplyTo": m.in_reply_to,
        "withdrawn": not m.active,
    }


def document(export: UserExport, *, at: datetime) -> dict[str, Any]:
    """The export as the README's schema has it."""
    return {
        "kind": EXPORT_KIND,
        "version": EXPORT_VERSION,
        "exportedAt": iso_utc(at),
        "platform": export.platform,
        "userId": export.user_id,
        "settings": {
            "timezone": export.timezone,
            "paired": export.paired,
            "followUps": [
                {"agentId": f.agent_id, "on": f.enabled, "updatedAt": iso_utc(f.updated_at)}
                for f in export.followups
            ],
        },
        "chats": [
            {
                "sessionKey": c.key,
                "agentId": c.agent_id,
                "kind": c.kind,
                "chatId": c.chat_id,
                "threadId": c.thread_id,
                "messages": [message_json(m) for m in c.messages],
            }
            for c in export.chats
        ],
        "followUps": [
            {
                "id": f.id,
                "sessionKey": f.session_key,
                "kind": f.kind,
                "status": f.status,
                "reason": f.reason,
                "suggestedText": f.suggested_text,
                "dueEarliest": iso_utc(f.due_earliest),
                "dueLatest": iso_utc(f.due_latest),
                "createdAt": iso_utc(f.created_at),
            }
            for f in export.follow_ups
        ],
        "reminders": [
            {
                "id": r.id,
                "sessionKey": r.session_key,
                "text": r.text,
                "kind": r.kind,
                "cron": r.cron,
                "timezone": r.timezone,
                "nextFireAt": iso_utc(r.next_fire_at),
                "status": r.status,
                "createdAt": iso_utc(r.created_at),
            }
            for r in export.reminders
        ],
        "queuedForExtraction": [
            {
                "sessionKey": q.session_key,
                "userText": q.user_text,
                "assistantText": q.assistant_text,
                "createdAt": iso_utc(q.created_at),
            }
            for q in export.queued
        ],
        "modelUsage": [
            {
                "at": iso_utc(u.at),
                "agentId": u.agent_id,
                "role": u.role,
                "model": u.model,
                "chatId": u.chat_id,
                "tokensIn": u.tokens_in,
                "tokensOut": u.tokens_out,
                "estimated": u.estimated,
            }
            for u in export.usage
        ],
    }


def document_text(export: UserExport, *, at: datetime) -> str:
    """The document as `kept users export` writes it and /export sends it."""
    return json.dumps(document(export, at=at), ensure_ascii=False, indent=2)
