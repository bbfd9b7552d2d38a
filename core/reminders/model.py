"""A reminder: an exact, user-requested message, bound to the chat it was asked in.

Unlike a commitment (inferred, fuzzy, delivered through a model turn), a
reminder is delivered verbatim at its time, with no model call. Its scope
(agent, session, platform, chat, thread) comes from the stored session of the
chat that scheduled it, never from model output, and decides where it may
ever be delivered.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from core.clock import iso_utc
from core.messages import Target, storable

ScheduleKind = Literal["at", "after", "cron"]
Status = Literal["active", "done", "cancelled", "failed"]

STATUSES: tuple[Status, ...] = get_args(Status)

ID_PREFIX = "rm_"


def new_reminder_id() -> str:
    """`rm_` + 12 hex digits (48 random bits): short enough to type, and the
    primary key rejects the rare collision."""
    return ID_PREFIX + secrets.token_hex(6)


@dataclass(frozen=True, slots=True)
class NewReminder:
    """A validated reminder, ready to be stored."""

    agent_id: str
    session_key: str
    target: Target
    created_by: str | None
    text: str
    kind: ScheduleKind
    cron: str | None  # the 5-field expression, for kind "cron" only
    timezone: str  # IANA name: cron fields are read in it, and times shown in it
    next_fire_at: datetime
    created_at: datetime

    def __post_init__(self) -> None:
        # The model's words (schedule_reminder's arguments), stored as they
        # are sent later: made storable like every text (core.messages).
        object.__setattr__(self, "text", storable(self.text))


@dataclass(frozen=True, slots=True)
class Reminder:
    id: str
    agent_id: str
    session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    created_by: str | None
    text: str
    kind: ScheduleKind
    cron: str | None
    timezone: str
    next_fire_at: datetime
    status: Status
    # Set while a worker holds a claim on it (see migration m0007 for the
    # claim's phase, owner and lease, which live in the database only).
    claimed_at: datetime | None
    last_fired_at: datetime | None
    attempts: int
    last_error: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def target(self) -> Target:
        return Target(self.platform, self.chat_id, self.thread_id)

    @property
    def recurring(self) -> bool:
        return self.kind == "cron"


def to_json(r: Reminder) -> dict[str, Any]:
    """The `kept reminders --json` shape (camelCase keys, ISO 8601 UTC times)."""
    return {
        "id": r.id,
        "agentId": r.agent_id,
        "sessionKey": r.session_key,
        "platform": r.platform,
        "chatId": r.chat_id,
        "threadId": r.thread_id,
        "createdBy": r.created_by,
        "text": r.text,
        "kind": r.kind,
        "cron": r.cron,
        "timezone": r.timezone,
        "status": r.status,
        "nextFireAt": iso_utc(r.next_fire_at),
        "lastFiredAt": iso_utc(r.last_fired_at),
        "attempts": r.attempts,
        "lastError": r.last_error,
        "createdAt": iso_utc(r.created_at),
    }
